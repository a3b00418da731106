//! Where something was written in the policy file, for errors that name `file:line:column`.

use std::fmt;

/// Where something was written in the policy file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SourcePos {
    /// 1-based line.
    pub line: u64,
    /// 1-based column.
    pub column: u64,
}

impl fmt::Display for SourcePos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}
