//! stdout (`--output-file ""`): NFD's `key=value` lines or JSON, once in a one-shot run, on each
//! change in a daemon. (`nvlabel hook` prints its own lines, `pass::hook`.)

use super::render as output;
use super::{Building, DaemonWriter, FailureReason, Format, Watches, WriterPlan};
use super::{PublishError, Writer};
use crate::labels::Labels;
use futures::future::BoxFuture;
use std::io::Write;

/// Prints labels; in a daemon, only when they changed.
pub struct Stdout {
    format: Format,
    last: Option<Labels>,
}

impl Stdout {
    /// The writer's name in logs and metrics.
    pub const NAME: &'static str = "stdout";

    /// A stdout writer in `format`.
    pub fn new(format: Format) -> Stdout {
        Stdout { format, last: None }
    }
}

/// stdout before it is built.
pub struct StdoutPlan {
    /// How the labels look.
    pub format: Format,
}

impl WriterPlan for StdoutPlan {
    fn name(&self) -> &'static str {
        Stdout::NAME
    }

    fn failure_reasons(&self) -> &'static [FailureReason] {
        &[FailureReason::Stdout, FailureReason::Setup]
    }

    fn build_daemon<'a>(
        &'a self,
        _: Option<&'a kube::Client>,
        _: &'a Watches,
    ) -> Building<'a, dyn DaemonWriter> {
        Box::pin(async move {
            let writer: Box<dyn DaemonWriter> = Box::new(Stdout::new(self.format));
            Ok(writer)
        })
    }
}

impl Writer for Stdout {
    fn name(&self) -> &'static str {
        Stdout::NAME
    }

    fn publish<'a>(&'a mut self, labels: &'a Labels) -> BoxFuture<'a, Result<bool, PublishError>> {
        Box::pin(async move {
            if self.last.as_ref() == Some(labels) {
                return Ok(false);
            }
            let text = match self.format {
                Format::Text => output::render_text(labels),
                Format::Json => output::render_json(labels),
            };
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(PublishError::Stdout)?;
            self.last = Some(labels.clone());
            Ok(true)
        })
    }
}
