//! Choosing among the candidates that passed: a rule over numbers the runs
//! reported (fewest changed lines, fewest tokens, first to finish). The
//! judge agent, the fourth way, is in `judge.rs`.

use serde::Serialize;

use super::CandidateResult;

/// How the winner is chosen among the candidates that passed the check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TieBreak {
    /// The smallest diff (lines added plus removed).
    FewestLines,
    /// The fewest tokens reported (cached ones included); an agent that
    /// reported none ranks last.
    FewestTokens,
    /// The first to finish.
    First,
    /// A judge agent reads the diffs and names the best.
    Judge,
}

impl TieBreak {
    pub fn parse(text: &str) -> Option<TieBreak> {
        Some(match text {
            "fewest-lines" => TieBreak::FewestLines,
            "fewest-tokens" => TieBreak::FewestTokens,
            "first" => TieBreak::First,
            "judge" => TieBreak::Judge,
            _ => return None,
        })
    }
}

/// The winner's index (from 1) among `passing` by `rule` (not the judge),
/// and why, with the numbers. A tie goes to the lower index.
pub fn choose(passing: &[&CandidateResult], rule: TieBreak) -> (usize, String) {
    if let [only] = passing {
        return (only.index, "the only candidate that passed".to_string());
    }
    let (what, unit, key): (&str, &str, fn(&CandidateResult) -> u64) = match rule {
        TieBreak::FewestTokens => ("fewest tokens", "tokens", |c| {
            if c.tokens == 0 { u64::MAX } else { c.tokens }
        }),
        TieBreak::First => ("first to finish", "ms", |c| c.finished_ms),
        _ => ("fewest changed lines", "lines", |c| {
            c.diff.map_or(u64::MAX, |d| d.lines() as u64)
        }),
    };
    let mut ranked: Vec<&&CandidateResult> = passing.iter().collect();
    ranked.sort_by_key(|c| (key(c), c.index));
    let shown = |c: &CandidateResult| match key(c) {
        u64::MAX => format!("#{} none reported", c.index),
        n => format!("#{} {n} {unit}", c.index),
    };
    let others: Vec<String> = ranked[1..].iter().map(|c| shown(c)).collect();
    let winner = ranked[0];
    (
        winner.index,
        format!(
            "{what} of the {} that passed: {} against {}",
            passing.len(),
            shown(winner),
            others.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worktree::DiffStat;

    fn candidate(index: usize, lines: usize, tokens: u64, finished_ms: u64) -> CandidateResult {
        CandidateResult {
            diff: Some(DiffStat {
                files: 1,
                insertions: lines,
                deletions: 0,
            }),
            tokens,
            finished_ms,
            ..CandidateResult::new(
                index,
                format!("c-{index}"),
                "claude-code".into(),
                None,
                format!("b{index}"),
            )
        }
    }

    #[test]
    fn each_rule_picks_its_smallest_and_says_the_numbers() {
        let (a, b, c) = (
            candidate(1, 40, 900, 30),
            candidate(2, 3, 1200, 50),
            candidate(3, 12, 0, 10),
        );
        let all = [&a, &b, &c];
        let (won, why) = choose(&all, TieBreak::FewestLines);
        assert_eq!(won, 2);
        assert_eq!(
            why,
            "fewest changed lines of the 3 that passed: #2 3 lines against #3 12 lines, #1 40 lines"
        );
        let (won, why) = choose(&all, TieBreak::FewestTokens);
        assert_eq!(won, 1, "no usage ranks last: {why}");
        assert!(why.ends_with("#3 none reported"), "{why}");
        assert_eq!(choose(&all, TieBreak::First).0, 3);
    }

    #[test]
    fn a_tie_goes_to_the_lower_index_and_one_passer_wins_alone() {
        let (a, b) = (candidate(1, 5, 1, 1), candidate(2, 5, 1, 1));
        assert_eq!(choose(&[&b, &a], TieBreak::FewestLines).0, 1);
        assert_eq!(
            choose(&[&b], TieBreak::FewestLines),
            (2, "the only candidate that passed".to_string())
        );
    }

    #[test]
    fn names_parse() {
        for (text, rule) in [
            ("fewest-lines", TieBreak::FewestLines),
            ("fewest-tokens", TieBreak::FewestTokens),
            ("first", TieBreak::First),
            ("judge", TieBreak::Judge),
        ] {
            assert_eq!(TieBreak::parse(text), Some(rule));
        }
        assert_eq!(TieBreak::parse("best"), None);
    }
}
