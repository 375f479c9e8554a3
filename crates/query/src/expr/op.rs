//! The expression operators ([`Op`]), resolved from their names at parse time, with how each
//! takes its arguments; made from the rows of `table.rs`.

use super::table::op_rows;

/// How an operator takes its arguments.
#[derive(Clone, Copy, Debug)]
pub(super) enum Arity {
    /// An array (or one value) of any length.
    Any,
    /// An array of `lo..=hi` expressions (error 16020 otherwise).
    Positional(usize, usize),
    /// An object with these named arguments (`$filter: {input, as, cond}`).
    Named(&'static [&'static str]),
    /// A date part operator: `date`, `[date]` or `{date, timezone}`, parsed to one or two
    /// positional arguments.
    DatePart,
}

/// An operator's name and how it takes its arguments.
pub(super) struct Spec {
    pub name: &'static str,
    pub arity: Arity,
}

macro_rules! define_ops {
    ($($variant:ident $name:literal $arity:ident $(($($a:tt)*))? $eval:ident($f:path);)*) => {
        /// An expression operator, resolved from its name at parse time.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Op {
            $($variant),*
        }

        /// Every `Op`, in table order (so `from_name` maps a row back to its variant).
        pub(super) const ALL: &[Op] = &[$(Op::$variant),*];

        /// Indexed by `Op as usize`.
        const SPECS: &[Spec] = &[
            $(Spec { name: $name, arity: Arity::$arity $(($($a)*))? }),*
        ];
    };
}

op_rows!(define_ops);

impl Op {
    /// The operator called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Op> {
        let i = SPECS.iter().position(|s| s.name == name)?;
        Some(ALL[i])
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub(super) fn spec(self) -> &'static Spec {
        &SPECS[self as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_match_variants() {
        assert_eq!(SPECS.len(), ALL.len());
        for (i, op) in ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            assert_eq!(Op::from_name(op.name()), Some(*op));
        }
    }
}
