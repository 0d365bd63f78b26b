//! The one approval policy for what a plugin may do (programs, containers,
//! http origins, env keys, directories): a built-in gets what it declares,
//! an installed plugin what the user approved at `plugin add`, a component
//! file named on the command line what the user approves there. Nothing
//! else runs with a capability.

use std::io::{BufRead, IsTerminal, Write};

use crate::capability::Capabilities;
use crate::error::{Error, Result};

/// Where a loaded plugin's grants come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Built into sanddune (or a file byte-identical to a built-in): gets
    /// what it declares.
    BuiltIn,
    /// Gets what it asks for, cut down to this.
    Approved(Capabilities),
    /// A component file nobody approved yet: it may be described, not run.
    Unapproved,
}

/// How a component file named on the command line is approved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FileApproval {
    /// Refused with the flags that approve it (the library's default: it
    /// never prompts on its own).
    #[default]
    Refuse,
    /// Ask at the terminal (y/N); refused without one.
    Ask,
    /// Everything it asks for (`--yes`).
    Yes,
    /// Exactly these items (`--grant`), which it must ask for.
    Grants(Capabilities),
}

impl FileApproval {
    /// The policy of the `--yes` and `--grant` flags; neither: ask.
    pub fn from_flags(yes: bool, grants: &[String]) -> Result<Self> {
        if yes {
            return Ok(Self::Yes);
        }
        if grants.is_empty() {
            return Ok(Self::Ask);
        }
        let mut approved = Capabilities::default();
        for g in grants {
            approved.add_item(g).map_err(Error::input)?;
        }
        Ok(Self::Grants(approved))
    }
}

/// What `source` may have of what it `asked` for under `policy`; a refusal
/// is an input error naming what it asks for and how to approve it.
pub fn approve(source: &str, asked: &Capabilities, policy: &FileApproval) -> Result<Capabilities> {
    if asked.is_empty() {
        return Ok(Capabilities::default());
    }
    let items = asked.items().join(", ");
    match policy {
        FileApproval::Yes => Ok(asked.clone()),
        FileApproval::Grants(granted) => {
            let unasked = asked.missing(granted);
            if !unasked.is_empty() {
                return Err(Error::input(format!(
                    "`{source}` does not ask for {}: grant only what it asks for ({items})",
                    unasked.join(", ")
                )));
            }
            Ok(granted.clone())
        }
        FileApproval::Ask if std::io::stdin().is_terminal() => {
            if confirm(&format!("`{source}` asks for {items}. Approve?"))? {
                Ok(asked.clone())
            } else {
                Err(Error::input(format!(
                    "`{source}` was not approved: nothing ran"
                )))
            }
        }
        FileApproval::Ask | FileApproval::Refuse => Err(Error::input(format!(
            "`{source}` asks for {items}, which a component file gets only when you approve it: pass --yes to approve all of it, or --grant ITEM for each item (at a terminal you are asked)"
        ))),
    }
}

/// Ask a y/N question at the terminal; refuse without one.
pub fn confirm(question: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(Error::input(
            "approval needed and no terminal to ask at: pass --yes to approve what it asks for, or --grant for each thing you approve",
        ));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::Other(e.into()))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked() -> Capabilities {
        Capabilities::from_requests([("program", "sh"), ("containers", "")]).unwrap()
    }

    #[test]
    fn each_policy_gives_what_it_says() {
        let table: &[(FileApproval, std::result::Result<Vec<&str>, &str>)] = &[
            (FileApproval::Yes, Ok(vec!["program=sh", "containers"])),
            (
                FileApproval::from_flags(false, &["containers".into()]).unwrap(),
                Ok(vec!["containers"]),
            ),
            (
                FileApproval::from_flags(false, &["program=git".into()]).unwrap(),
                Err("does not ask for program=git"),
            ),
            (
                FileApproval::Refuse,
                Err(
                    "asks for program=sh, containers, which a component file gets only when you approve it: pass --yes",
                ),
            ),
        ];
        for (policy, expected) in table {
            let got = approve("x.wasm", &asked(), policy);
            match (got, expected) {
                (Ok(caps), Ok(items)) => assert_eq!(caps.items(), *items, "{policy:?}"),
                (Err(e), Err(needle)) => {
                    assert!(e.to_string().contains(needle), "{policy:?}: {e}");
                    assert_eq!(e.exit_code(), 2);
                }
                (got, _) => panic!("{policy:?}: {got:?}"),
            }
        }
    }

    #[test]
    fn asking_for_nothing_needs_no_approval() {
        let none = approve("x.wasm", &Capabilities::default(), &FileApproval::Refuse).unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn bad_grant_items_are_input_errors() {
        let e = FileApproval::from_flags(false, &["gpu".into()]).unwrap_err();
        assert!(e.to_string().contains("unknown capability `gpu`"), "{e}");
    }
}
