//! Which characters may not go into a name written to audit events, logs and pages: control
//! characters, and the invisible ones that change how text around them reads (direction
//! marks and overrides, zero-width characters, line and paragraph separators, the byte order
//! mark), with which `for bob` can be made to display as `for admin`.

/// Whether `c` may not be written into a name others read.
pub fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

#[cfg(test)]
mod tests {
    use super::unprintable;

    #[test]
    fn direction_marks_zero_widths_and_separators_are_unprintable_letters_are_not() {
        for c in [
            '\n', '\u{1b}', '\u{202E}', '\u{200B}', '\u{2028}', '\u{FEFF}', '\u{2066}',
        ] {
            assert!(unprintable(c), "{:?}", c);
        }
        for c in ['a', 'é', 'Ж', '中', ' ', '-', '@'] {
            assert!(!unprintable(c), "{:?}", c);
        }
    }
}
