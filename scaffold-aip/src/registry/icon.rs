//! The registry's rules for an entry's `icon.svg`, written from its `FORMAT.md`,
//! `CONTRIBUTING.md` and the icon checks of its build (`.github/workflows/build_registry.py`):
//! square, 16×16 (the `<svg>` element's `width`/`height`, else its `viewBox`), monochrome
//! (every `fill` and `stroke`, as attributes or in a `style`, is `currentColor`, `none` or
//! `inherit`), and `currentColor` used somewhere so the icon follows the client's theme.
//! The checks read the text, as the registry's do; the SVG is not rendered.

/// The side the registry wants, in pixels.
const SIZE: f64 = 16.0;

/// The colour values an icon may use.
const ALLOWED: [&str; 3] = ["currentcolor", "none", "inherit"];

/// Every rule `svg` breaks, as sentences (empty when it would be accepted).
pub fn check_icon(svg: &str) -> Vec<String> {
    let mut problems = Vec::new();
    match size(svg) {
        None => problems.push("the <svg> element has neither width and height nor a viewBox".to_string()),
        Some((width, height)) => {
            if width != height {
                problems.push(format!("the icon must be square, it is {width}×{height}"));
            }
            if width != SIZE || height != SIZE {
                problems.push(format!("the icon must be 16×16, it is {width}×{height}"));
            }
        }
    }
    for property in ["fill", "stroke"] {
        for value in attribute_values(svg, property) {
            if !allowed(value) {
                problems.push(format!(
                    "{property}=\"{value}\" is a fixed colour; use currentColor or none"
                ));
            }
        }
        for style in attribute_values(svg, "style") {
            if let Some(value) = style_property(style, property).filter(|value| !allowed(value)) {
                problems.push(format!(
                    "style {property}: {value} is a fixed colour; use currentColor or none"
                ));
            }
        }
    }
    if !svg.to_ascii_lowercase().contains("currentcolor") {
        problems.push("the icon never uses currentColor, so it cannot follow the client's theme".to_string());
    }
    problems.dedup();
    problems
}

fn allowed(value: &str) -> bool {
    ALLOWED.contains(&value.trim().to_ascii_lowercase().as_str())
}

/// Width and height: the `<svg>` element's integer `width`/`height`, else the last two
/// numbers of a `viewBox`.
fn size(svg: &str) -> Option<(f64, f64)> {
    let start = svg.find("<svg")?;
    let tag = &svg[start..];
    let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
    let integer = |name: &str| {
        let value = spaced_attribute_values(tag, name).into_iter().next()?;
        let digits = value.len() - value.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        value[..digits].parse::<f64>().ok()
    };
    if let (Some(width), Some(height)) = (integer("width"), integer("height")) {
        return Some((width, height));
    }
    let view_box = attribute_values(svg, "viewBox").into_iter().next()?;
    let numbers: Vec<f64> = view_box
        .split_whitespace()
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    match numbers.as_slice() {
        [_, _, width, height] => Some((*width, *height)),
        _ => None,
    }
}

/// The values of every `name="…"` (or `'…'`) attribute in `text`, the name matched as a whole
/// word and without regard to case.
fn attribute_values<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
    values_after(text, name, |before| {
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// [`attribute_values`] for names with white space before them (so `width` is not the end of
/// `stroke-width`).
fn spaced_attribute_values<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
    values_after(text, name, |before| before.is_some_and(char::is_whitespace))
}

/// The values of the `name="…"` attributes whose name the character before satisfies `starts`.
fn values_after<'t>(text: &'t str, name: &str, starts: impl Fn(Option<char>) -> bool) -> Vec<&'t str> {
    let lower = text.to_ascii_lowercase();
    let name = name.to_ascii_lowercase();
    let mut values = Vec::new();
    for (at, _) in lower.match_indices(&name) {
        let word_start = starts(lower[..at].chars().next_back());
        let rest = text[at + name.len()..].trim_start();
        let Some(rest) = rest.strip_prefix('=').filter(|_| word_start) else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(value) = rest.strip_prefix(['"', '\'']) else {
            continue;
        };
        if let Some(end) = value.find(['"', '\'']).filter(|end| *end > 0) {
            values.push(&value[..end]);
        }
    }
    values
}

/// The value of the first `property: value` in a `style` attribute.
fn style_property<'s>(style: &'s str, property: &str) -> Option<&'s str> {
    let lower = style.to_ascii_lowercase();
    lower.match_indices(property).find_map(|(at, _)| {
        let word_start = !lower[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let rest = style[at + property.len()..].trim_start().strip_prefix(':')?;
        let value = rest.split(';').next()?.trim();
        (word_start && !value.is_empty()).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_themed_square_icon_passes_and_each_fault_is_named() {
        let good = r#"<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16"><path fill="currentColor" stroke-width="2" d="M0 0h16v16z"/></svg>"#;
        assert_eq!(check_icon(good), Vec::<String>::new());
        let by_view_box = r#"<svg viewBox="0 0 16 16"><path style="fill: currentColor"/></svg>"#;
        assert_eq!(check_icon(by_view_box), Vec::<String>::new());
        let wide = r#"<svg width="32" height="16"><path fill="currentColor"/></svg>"#;
        assert_eq!(check_icon(wide).len(), 2, "{:?}", check_icon(wide));
        let red = r##"<svg viewBox="0 0 16 16"><path fill="#f00" style="stroke:red"/></svg>"##;
        let problems = check_icon(red);
        assert!(problems.iter().any(|p| p.contains("fill=\"#f00\"")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("style stroke: red")), "{problems:?}");
        assert!(
            problems.iter().any(|p| p.contains("never uses currentColor")),
            "{problems:?}"
        );
        assert!(check_icon("<svg><path/></svg>")[0].contains("neither width"));
    }
}
