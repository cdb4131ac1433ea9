//! Text for people: pull request titles and bodies, the questions a step asks.
//! Unlike the prompt helpers ([`crate::prompts::head`]), a cut here never adds a
//! line break or a byte count: it must read as one line of prose.

/// `text` on one line (every run of whitespace, line breaks included, becomes one
/// space) of at most `max` characters. A longer text is cut at the last word
/// boundary in its final third (else mid-word) and ends with `…`.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let Some(room) = max.checked_sub(1) else {
        return String::new();
    };
    let end = flat.char_indices().nth(room).map_or(flat.len(), |(i, _)| i);
    let cut = &flat[..end];
    let kept = match cut.rfind(' ') {
        Some(space) if space * 3 >= cut.len() * 2 => &cut[..space],
        _ => cut,
    };
    format!("{}…", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn short_text_is_only_flattened() {
        assert_eq!(one_line("Add a\n\n  section ", 72), "Add a section");
    }

    #[test]
    fn a_long_text_is_cut_at_a_word_within_the_limit() {
        let text = "word ".repeat(40);
        let line = one_line(&text, 72);
        assert_eq!(line, format!("{}…", ["word"; 14].join(" ")));
    }

    #[test]
    fn one_long_word_is_cut_inside_it_and_multibyte_text_is_counted_in_characters() {
        let line = one_line(&"é".repeat(100), 10);
        assert_eq!(line, format!("{}…", "é".repeat(9)));
        assert_eq!(one_line("abc", 0), "");
    }

    proptest::proptest! {
        #[test]
        fn any_text_fits_on_one_line_within_the_limit(text in "\\PC*(\n\\PC*){0,3}", max in 0usize..120) {
            let line = one_line(&text, max);
            proptest::prop_assert!(line.chars().count() <= max);
            proptest::prop_assert!(!line.contains('\n'));
        }
    }
}
