//! The C library's `pow`, from the `libm` crate (musl's, ported): the one function of libm.so.6
//! the binary calls (tokio's scheduler averages its poll times with it). Defined here, the linker
//! finds it in the binary and drops libm.so.6 from what the process loads: 340 KiB less resident
//! in every nvlabel process, for one function (docs/scale.md, "What a node pays").

/// `pow(x, y)`, as C's.
// Unsafe only in that the name is the C library's: it is one, and does what that one does.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_is_cs_pow() {
        assert_eq!(super::pow(2.0, 10.0), 1024.0);
        assert_eq!(super::pow(0.9, 0.0), 1.0);
        // 2^-1.5 = 0.35355339059327376220...: within one ulp, as the C library's promises.
        assert!((super::pow(0.5, 1.5) - 0.353_553_390_593_273_8).abs() <= f64::EPSILON * 0.5);
        assert!(super::pow(-1.0, 0.5).is_nan());
    }
}
