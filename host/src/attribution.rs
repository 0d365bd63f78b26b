//! How the agent's commits are attributed, as the project config or a
//! caller asks (ADR 0010): an agent identity as the author (the user stays
//! the committer) and a `Co-authored-by` trailer. `run::identity` turns
//! these into the identity a sandbox commits with.

/// A git author or committer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitIdentity {
    pub name: String,
    pub email: String,
}

impl GitIdentity {
    /// `Name <email>`, as in a trailer.
    pub fn parse(text: &str) -> Option<Self> {
        let (name, rest) = text.trim().split_once('<')?;
        let email = rest.strip_suffix('>')?.trim();
        let name = name.trim();
        (!name.is_empty() && !email.is_empty() && !email.contains(['<', '>'])).then(|| Self {
            name: name.into(),
            email: email.into(),
        })
    }
}

impl std::fmt::Display for GitIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} <{}>", self.name, self.email)
    }
}

/// Who a `Co-authored-by` trailer names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoAuthor {
    /// The user's own identity (with an agent identity as the author).
    User,
    Identity(GitIdentity),
}

/// How the agent's commits are attributed, beyond the user's identity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitOptions {
    /// The author of the agent's commits instead of the user, who stays the
    /// committer.
    pub agent_identity: Option<GitIdentity>,
    /// A `Co-authored-by` trailer on each of the agent's commits.
    pub co_authored_by: Option<CoAuthor>,
}
