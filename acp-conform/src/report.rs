//! The output formats of a run: one line per check (human), JSON, JUnit XML, and GitHub
//! Actions annotations.

use serde_json::json;

use crate::{Outcome, Verdict, trim};

/// How verdicts are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `PASS id` / `FAIL id: evidence` / `SKIP id: reason`, one line each, and a summary.
    Human,
    /// One JSON document.
    Json,
    /// A JUnit XML test suite.
    Junit,
    /// GitHub Actions `::error` lines for failures, then the human lines.
    Github,
}

/// Whether every verdict passed or was skipped.
pub fn all_passed(verdicts: &[Verdict]) -> bool {
    verdicts.iter().all(|v| !matches!(v.outcome, Outcome::Fail(_)))
}

/// Counts of (pass, fail, skip).
pub fn counts(verdicts: &[Verdict]) -> (usize, usize, usize) {
    let count = |f: fn(&Outcome) -> bool| verdicts.iter().filter(|v| f(&v.outcome)).count();
    (
        count(|o| matches!(o, Outcome::Pass)),
        count(|o| matches!(o, Outcome::Fail(_))),
        count(|o| matches!(o, Outcome::Skip(_))),
    )
}

/// The report of `verdicts` in `format`.
pub fn render(verdicts: &[Verdict], format: Format) -> String {
    match format {
        Format::Human => human(verdicts),
        Format::Json => {
            let (pass, fail, skip) = counts(verdicts);
            let document = json!({"checks": verdicts, "summary": {"pass": pass, "fail": fail, "skip": skip}});
            format!("{}\n", serde_json::to_string_pretty(&document).unwrap_or_default())
        }
        Format::Junit => junit(verdicts),
        Format::Github => {
            let mut text = String::new();
            for verdict in verdicts {
                if let Outcome::Fail(evidence) = &verdict.outcome {
                    text += &format!(
                        "::error title=conform {}::{}\n",
                        verdict.id,
                        escape_github(&trim(evidence))
                    );
                }
            }
            text + &human(verdicts)
        }
    }
}

fn human(verdicts: &[Verdict]) -> String {
    let mut text = String::new();
    for verdict in verdicts {
        text += &match &verdict.outcome {
            Outcome::Pass => format!("PASS {}\n", verdict.id),
            Outcome::Fail(evidence) => format!("FAIL {}: {}\n", verdict.id, trim(evidence)),
            Outcome::Skip(reason) => format!("SKIP {}: {}\n", verdict.id, trim(reason)),
        };
    }
    let (pass, fail, skip) = counts(verdicts);
    text + &format!("{pass} passed, {fail} failed, {skip} skipped\n")
}

fn junit(verdicts: &[Verdict]) -> String {
    let (_, fail, skip) = counts(verdicts);
    let mut text = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"acp-conform\" tests=\"{}\" failures=\"{fail}\" skipped=\"{skip}\">\n",
        verdicts.len()
    );
    for verdict in verdicts {
        let open = format!(
            "  <testcase classname=\"acp-conform\" name=\"{}\" time=\"{:.3}\"",
            escape_xml(verdict.id),
            verdict.millis as f64 / 1000.0
        );
        text += &match &verdict.outcome {
            Outcome::Pass => format!("{open}/>\n"),
            Outcome::Fail(evidence) => format!(
                "{open}>\n    <failure message=\"{}\"/>\n  </testcase>\n",
                escape_xml(&trim(evidence))
            ),
            Outcome::Skip(reason) => format!(
                "{open}>\n    <skipped message=\"{}\"/>\n  </testcase>\n",
                escape_xml(&trim(reason))
            ),
        };
    }
    text + "</testsuite>\n"
}

fn escape_xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn escape_github(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts() -> Vec<Verdict> {
        let verdict = |id, outcome| Verdict {
            id,
            title: "t",
            rule: "r",
            outcome,
            millis: 1,
        };
        vec![
            verdict("a.pass", Outcome::Pass),
            verdict("b.fail", Outcome::Fail("got <\"x\" & y>\nnext line".into())),
            verdict("c.skip", Outcome::Skip("no --manifest".into())),
        ]
    }

    #[test]
    fn every_format_carries_each_outcome_and_escapes_the_evidence() {
        let verdicts = verdicts();
        assert!(!all_passed(&verdicts));
        assert_eq!(counts(&verdicts), (1, 1, 1));
        let human = render(&verdicts, Format::Human);
        assert_eq!(human.lines().count(), 4, "{human}");
        assert!(human.contains("FAIL b.fail: got <\"x\" & y> next line"), "{human}");
        let json: serde_json::Value = serde_json::from_str(&render(&verdicts, Format::Json)).expect("JSON");
        assert_eq!(json["checks"][1]["outcome"], "fail");
        assert_eq!(json["checks"][2]["outcome"], "skip");
        assert_eq!(json["summary"]["fail"], 1);
        let junit = render(&verdicts, Format::Junit);
        assert!(junit.contains("failures=\"1\" skipped=\"1\""), "{junit}");
        assert!(junit.contains("&lt;&quot;x&quot; &amp; y&gt;"), "{junit}");
        let github = render(&verdicts, Format::Github);
        assert_eq!(
            github.lines().filter(|l| l.starts_with("::error")).count(),
            1,
            "{github}"
        );
    }
}
