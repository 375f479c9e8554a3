//! A command's `let` (find, aggregate, update, delete, findAndModify) evaluated into the
//! [`Scope`] its expressions read: each variable once, before any document is read.

use bson::Document;

use super::{parse_expr, Ctx, Expr};
use crate::error::{DocError, DocResult};
use crate::vars::{self, Binding, Scope};

/// The system variables a command's `let` may set, with the type each must have (mongod's
/// `kSystemVarValidators`: a router passes them to shards); every other name is a user
/// variable's.
const SETTABLE_SYSTEM_VARS: &[(&str, bson::spec::ElementType, &str)] = &[
    ("NOW", bson::spec::ElementType::DateTime, "date"),
    (
        "CLUSTER_TIME",
        bson::spec::ElementType::Timestamp,
        "timestamp",
    ),
];

impl Scope {
    /// Evaluates a command's `let` document, each variable once and in order (a later one may
    /// read an earlier one), as mongod's `Variables::seedVariablesWithLetParameters`: a name is
    /// a user variable's (mongod's rules), or `NOW`/`CLUSTER_TIME` given as a value of their
    /// type; an expression may not read the document (4890500: it runs before any is read).
    pub fn from_let(let_doc: &Document) -> DocResult<Scope> {
        vars::EMPTY.bind_let(let_doc)
    }

    /// This scope with `let_doc`'s variables added (evaluated as [`Scope::from_let`]'s, where
    /// this scope's are in scope): an update statement's constants (`c`) over the command's
    /// `let`. A name bound again takes the new value.
    pub fn bind_let(&self, let_doc: &Document) -> DocResult<Scope> {
        let mut bound: Vec<Binding> = self.bindings().to_vec();
        let empty = Document::new();
        for (name, v) in let_doc {
            if let Some((_, ty, ty_name)) = SETTABLE_SYSTEM_VARS.iter().find(|s| s.0 == name) {
                if v.element_type() != *ty {
                    return Err(DocError::type_mismatch(format!(
                        "Builtin variable '$${name}' must be of type {ty_name}, found {}",
                        crate::compare::type_name(v)
                    )));
                }
                bound.push((name.clone(), Some(v.clone())));
                continue;
            }
            vars::check_var_name(name)?;
            let e = parse_expr(v)?;
            if e.reads_document() {
                return Err(DocError::with_code(
                    4890500,
                    "Location4890500",
                    "Command let Expression tried to access a field, but this is not allowed because command let expressions run before the query examines any documents.",
                ));
            }
            let earlier = Scope::of(bound.clone());
            let value = e.eval(&Ctx::scoped(&empty, &earlier))?;
            bound.retain(|(n, _)| n != name);
            bound.push((name.clone(), value));
        }
        Ok(Scope::of(bound))
    }
}

impl Expr {
    /// Whether evaluating reads the document: a field path, `$$ROOT` or `$$CURRENT` anywhere
    /// in the tree (mongod's "has requirements" of a command's `let`).
    pub fn reads_document(&self) -> bool {
        match self {
            Expr::Lit(_) => false,
            Expr::Field(_) => true,
            Expr::Var(name, _) => name == "ROOT" || name == "CURRENT",
            Expr::Obj(fields) => fields.iter().any(|(_, e)| e.reads_document()),
            Expr::Named(_, args) => args.iter().any(|(_, e)| e.reads_document()),
            Expr::Arr(items) | Expr::Op(_, items) => items.iter().any(Expr::reads_document),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson};

    fn code(r: DocResult<Scope>) -> i32 {
        r.expect_err("refused").code
    }

    #[test]
    fn let_is_evaluated_once_in_order() {
        let s = Scope::from_let(&doc! {
            "a": 2, "b": {"$add": ["$$a", 1]}, "s": {"$literal": "$x"}, "r": "$$REMOVE"
        })
        .unwrap();
        assert_eq!(s.get("a"), Some(Some(&Bson::Int32(2))));
        assert_eq!(s.get("b"), Some(Some(&Bson::Int32(3))));
        assert_eq!(s.get("s"), Some(Some(&Bson::String("$x".into()))));
        assert_eq!(s.get("r"), Some(None));
        assert_eq!(s.get("z"), None);
        assert!(Scope::from_let(&doc! {}).unwrap().is_empty());
        // Constants over a command's let: new names added, a name bound again replaced.
        let c = s.bind_let(&doc! {"a": 5, "c": "$$b"}).unwrap();
        assert_eq!(c.get("a"), Some(Some(&Bson::Int32(5))));
        assert_eq!(c.get("c"), Some(Some(&Bson::Int32(3))));
        assert_eq!(s.get("a"), Some(Some(&Bson::Int32(2))));
        // $rand is evaluated once: every read sees the same value.
        let s = Scope::from_let(&doc! {"r": {"$rand": {}}}).unwrap();
        let e = parse_expr(&Bson::String("$$r".into())).unwrap();
        let d = doc! {};
        let (x, y) = (
            e.eval(&Ctx::scoped(&d, &s)).unwrap(),
            e.eval(&Ctx::scoped(&d, &s)).unwrap(),
        );
        assert!(matches!(x, Some(Bson::Double(_))));
        assert_eq!(x, y);
    }

    #[test]
    fn let_names_follow_mongods_rules() {
        assert_eq!(code(Scope::from_let(&doc! {"ROOT": 1})), 16867);
        assert_eq!(code(Scope::from_let(&doc! {"CURRENT": {}})), 16867);
        assert_eq!(code(Scope::from_let(&doc! {"Abc": 1})), 16867);
        assert_eq!(code(Scope::from_let(&doc! {"_a": 1})), 16867);
        assert_eq!(code(Scope::from_let(&doc! {"": 1})), 16866);
        assert_eq!(code(Scope::from_let(&doc! {"a-b": 1})), 16868);
        assert!(Scope::from_let(&doc! {"aB_9": 1, "é": 2}).is_ok());
        // NOW may be set, as a date only.
        assert_eq!(code(Scope::from_let(&doc! {"NOW": 1})), 14);
        let now = bson::DateTime::from_millis(5);
        let s = Scope::from_let(&doc! {"NOW": now}).unwrap();
        let e = parse_expr(&Bson::String("$$NOW".into())).unwrap();
        assert_eq!(
            e.eval(&Ctx::scoped(&doc! {}, &s)).unwrap(),
            Some(Bson::DateTime(now))
        );
    }

    #[test]
    fn let_may_not_read_the_document() {
        for v in [
            Bson::String("$a".into()),
            Bson::String("$$ROOT".into()),
            Bson::String("$$CURRENT.a".into()),
            bson::bson!({"$add": [1, "$a"]}),
            bson::bson!({"x": ["$a"]}),
        ] {
            assert_eq!(code(Scope::from_let(&doc! {"v": v})), 4890500);
        }
        // An undefined variable is mongod's 17276.
        assert_eq!(code(Scope::from_let(&doc! {"v": "$$nope"})), 17276);
    }

    #[test]
    fn expression_variables_shadow_the_commands() {
        let s = Scope::from_let(&doc! {"x": 1}).unwrap();
        let e = parse_expr(&bson::bson!({"$let": {"vars": {"x": 2}, "in": "$$x"}})).unwrap();
        assert_eq!(
            e.eval(&Ctx::scoped(&doc! {}, &s)).unwrap(),
            Some(Bson::Int32(2))
        );
        let _frame = vars::bind(vec![("x".into(), Some(Bson::Int32(3)))]);
        let e = parse_expr(&Bson::String("$$x".into())).unwrap();
        assert_eq!(
            e.eval(&Ctx::scoped(&doc! {}, &s)).unwrap(),
            Some(Bson::Int32(3))
        );
    }
}
