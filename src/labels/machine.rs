//! `nvidia.com/gpu.machine` from the DMI product name.

use super::{key, value, Labels};
use crate::snapshot::MachineType;

/// The machine label: `unknown` when no file is configured or it cannot be read.
pub fn labels(machine: &MachineType, warnings: &mut Vec<String>) -> Labels {
    let v = match (&machine.content, &machine.error) {
        (Some(content), _) => match value::make_valid(&value::sanitise(content.trim())) {
            Some(v) => v,
            None => {
                warnings
                    .push(format!("omitting nvidia.com/gpu.machine: {content:?} has no valid label value"));
                return Labels::new();
            }
        },
        (None, Some(error)) => {
            warnings.push(format!(
                "Error getting machine type from {}: could not open machine type file: {error}",
                machine.path
            ));
            "unknown".into()
        }
        (None, None) => "unknown".into(),
    };
    Labels::from([(key("gpu.machine"), v)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(content: Option<&str>, error: Option<&str>) -> Option<String> {
        let m =
            MachineType { path: "/f".into(), content: content.map(Into::into), error: error.map(Into::into) };
        labels(&m, &mut Vec::new()).get("nvidia.com/gpu.machine").cloned()
    }

    #[test]
    fn machine_values() {
        assert_eq!(of(Some("product-name\n"), None).unwrap(), "product-name");
        assert_eq!(of(Some("NVIDIA DGX H100"), None).unwrap(), "NVIDIA-DGX-H100");
        assert_eq!(of(Some("To Be Filled By O.E.M."), None).unwrap(), "To-Be-Filled-By-O.E.M");
        assert_eq!(of(None, Some("no such file")).unwrap(), "unknown");
        assert_eq!(of(None, None).unwrap(), "unknown");
        assert_eq!(of(Some("((()))"), None), None);
        assert_eq!(of(Some(&"Long Machine Name ".repeat(5)), None).unwrap().len(), 63);
    }
}
