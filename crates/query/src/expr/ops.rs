//! The operator table: each expression operator's name, how it takes its arguments, and how it
//! evaluates, in one row. Parsing resolves a name to an [`Op`] once; evaluation dispatches on the
//! `Op` through this table and never compares names. Adding an operator is one row here plus its
//! function in its family's file.

use bson::Bson;

use super::{
    arith, array, cond, convert, date, date_arith, date_fmt, is_nullish, object, set, string, Ctx,
    Expr,
};
use crate::compare::Num;
use crate::error::DocResult;

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

/// How an operator evaluates.
#[derive(Clone, Copy)]
pub(super) enum Eval {
    /// Evaluates its own arguments (the short-circuiting `$cond`, `$and`, `$or`, `$ifNull`).
    Lazy(fn(Op, &[Expr], &Ctx) -> DocResult<Option<Bson>>),
    /// Takes its positional arguments already evaluated.
    Values(fn(Op, &Args, &Ctx) -> DocResult<Option<Bson>>),
    /// Takes named arguments and evaluates them itself (they may bind variables).
    Named(fn(Op, &NamedArgs, &Ctx) -> DocResult<Option<Bson>>),
}

pub(super) struct Spec {
    pub name: &'static str,
    pub arity: Arity,
    pub eval: Eval,
}

macro_rules! op_table {
    ($($variant:ident $name:literal $arity:ident $(($($a:tt)*))? $eval:ident($f:path);)*) => {
        /// An expression operator, resolved from its name at parse time.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Op {
            $($variant),*
        }

        /// Every `Op`, in table order (so `from_name` maps a row back to its variant).
        const ALL: &[Op] = &[$(Op::$variant),*];

        /// Indexed by `Op as usize`.
        const TABLE: &[Spec] = &[
            $(Spec { name: $name, arity: Arity::$arity $(($($a)*))?, eval: Eval::$eval($f) }),*
        ];
    };
}

op_table! {
    Add "$add" Any Values(arith::add);
    Subtract "$subtract" Positional(2, 2) Values(arith::subtract);
    Multiply "$multiply" Any Values(arith::multiply);
    Divide "$divide" Positional(2, 2) Values(arith::divide_mod_pow);
    Mod "$mod" Positional(2, 2) Values(arith::divide_mod_pow);
    Abs "$abs" Positional(1, 1) Values(arith::unary_math);
    Ceil "$ceil" Positional(1, 1) Values(arith::unary_math);
    Floor "$floor" Positional(1, 1) Values(arith::unary_math);
    Sqrt "$sqrt" Positional(1, 1) Values(arith::unary_math);
    Pow "$pow" Positional(2, 2) Values(arith::divide_mod_pow);
    Exp "$exp" Positional(1, 1) Values(arith::unary_math);
    Ln "$ln" Positional(1, 1) Values(arith::unary_math);
    Log10 "$log10" Positional(1, 1) Values(arith::unary_math);
    Trunc "$trunc" Positional(1, 2) Values(arith::unary_math);
    Round "$round" Positional(1, 2) Values(arith::unary_math);
    Log "$log" Positional(2, 2) Values(arith::log);
    Sin "$sin" Positional(1, 1) Values(arith::trig);
    Cos "$cos" Positional(1, 1) Values(arith::trig);
    Tan "$tan" Positional(1, 1) Values(arith::trig);
    Asin "$asin" Positional(1, 1) Values(arith::trig);
    Acos "$acos" Positional(1, 1) Values(arith::trig);
    Atan "$atan" Positional(1, 1) Values(arith::trig);
    Atan2 "$atan2" Positional(2, 2) Values(arith::atan2);
    Sinh "$sinh" Positional(1, 1) Values(arith::trig);
    Cosh "$cosh" Positional(1, 1) Values(arith::trig);
    Tanh "$tanh" Positional(1, 1) Values(arith::trig);
    Asinh "$asinh" Positional(1, 1) Values(arith::trig);
    Acosh "$acosh" Positional(1, 1) Values(arith::trig);
    Atanh "$atanh" Positional(1, 1) Values(arith::trig);
    DegreesToRadians "$degreesToRadians" Positional(1, 1) Values(arith::trig);
    RadiansToDegrees "$radiansToDegrees" Positional(1, 1) Values(arith::trig);
    BitAnd "$bitAnd" Any Values(arith::bitwise);
    BitOr "$bitOr" Any Values(arith::bitwise);
    BitXor "$bitXor" Any Values(arith::bitwise);
    BitNot "$bitNot" Positional(1, 1) Values(arith::bitwise);
    StdDevPop "$stdDevPop" Any Values(arith::std_dev);
    StdDevSamp "$stdDevSamp" Any Values(arith::std_dev);
    Median "$median" Named(&["input", "method"]) Named(arith::percentile);
    Percentile "$percentile" Named(&["input", "p", "method"]) Named(arith::percentile);
    Eq "$eq" Positional(2, 2) Values(cond::compare);
    Ne "$ne" Positional(2, 2) Values(cond::compare);
    Gt "$gt" Positional(2, 2) Values(cond::compare);
    Gte "$gte" Positional(2, 2) Values(cond::compare);
    Lt "$lt" Positional(2, 2) Values(cond::compare);
    Lte "$lte" Positional(2, 2) Values(cond::compare);
    Cmp "$cmp" Positional(2, 2) Values(cond::compare);
    And "$and" Any Lazy(cond::and);
    Or "$or" Any Lazy(cond::or);
    Not "$not" Positional(1, 1) Values(cond::not);
    Cond "$cond" Positional(3, 3) Lazy(cond::cond);
    IfNull "$ifNull" Positional(2, usize::MAX) Lazy(cond::if_null);
    Concat "$concat" Any Values(string::concat);
    ToUpper "$toUpper" Positional(1, 1) Values(string::change_case);
    ToLower "$toLower" Positional(1, 1) Values(string::change_case);
    Substr "$substr" Positional(3, 3) Values(string::substr);
    SubstrBytes "$substrBytes" Positional(3, 3) Values(string::substr);
    SubstrCP "$substrCP" Positional(3, 3) Values(string::substr);
    StrLenBytes "$strLenBytes" Positional(1, 1) Values(string::str_len);
    StrLenCP "$strLenCP" Positional(1, 1) Values(string::str_len);
    Split "$split" Positional(2, 2) Values(string::split);
    Strcasecmp "$strcasecmp" Positional(2, 2) Values(string::strcasecmp);
    Size "$size" Positional(1, 1) Values(array::size);
    ArrayElemAt "$arrayElemAt" Positional(2, 2) Values(array::array_elem_at);
    First "$first" Positional(1, 1) Values(array::first_last);
    Last "$last" Positional(1, 1) Values(array::first_last);
    In "$in" Positional(2, 2) Values(array::in_array);
    IsArray "$isArray" Positional(1, 1) Values(array::is_array);
    ConcatArrays "$concatArrays" Any Values(array::concat_arrays);
    Slice "$slice" Positional(2, 3) Values(array::slice);
    ReverseArray "$reverseArray" Positional(1, 1) Values(array::reverse_array);
    Range "$range" Positional(2, 3) Values(array::range);
    IndexOfArray "$indexOfArray" Positional(2, 4) Values(array::index_of_array);
    MergeObjects "$mergeObjects" Any Values(object::merge_objects);
    ObjectToArray "$objectToArray" Positional(1, 1) Values(object::object_to_array);
    ArrayToObject "$arrayToObject" Positional(1, 1) Values(object::array_to_object);
    Sum "$sum" Any Values(arith::sum_avg_min_max);
    Avg "$avg" Any Values(arith::sum_avg_min_max);
    Min "$min" Any Values(arith::sum_avg_min_max);
    Max "$max" Any Values(arith::sum_avg_min_max);
    Type "$type" Positional(1, 1) Values(convert::type_of);
    ToString "$toString" Positional(1, 1) Values(convert::to_type);
    ToInt "$toInt" Positional(1, 1) Values(convert::to_type);
    ToLong "$toLong" Positional(1, 1) Values(convert::to_type);
    ToDouble "$toDouble" Positional(1, 1) Values(convert::to_type);
    ToDecimal "$toDecimal" Positional(1, 1) Values(convert::to_type);
    ToBool "$toBool" Positional(1, 1) Values(convert::to_type);
    ToObjectId "$toObjectId" Positional(1, 1) Values(convert::to_type);
    ToDate "$toDate" Positional(1, 1) Values(convert::to_type);
    Convert "$convert" Named(&["input", "to", "onError", "onNull"]) Named(convert::convert_op);
    ToUUID "$toUUID" Positional(1, 1) Values(convert::to_uuid);
    BinarySize "$binarySize" Positional(1, 1) Values(convert::binary_size);
    BsonSize "$bsonSize" Positional(1, 1) Values(convert::bson_size);
    ToHashedIndexKey "$toHashedIndexKey" Positional(1, 1) Values(convert::to_hashed_index_key);
    TsSecond "$tsSecond" Positional(1, 1) Values(convert::timestamp_part);
    TsIncrement "$tsIncrement" Positional(1, 1) Values(convert::timestamp_part);
    IsNumber "$isNumber" Positional(1, 1) Values(convert::is_number);
    Year "$year" DatePart Values(date::date_part_of);
    Month "$month" DatePart Values(date::date_part_of);
    DayOfMonth "$dayOfMonth" DatePart Values(date::date_part_of);
    Hour "$hour" DatePart Values(date::date_part_of);
    Minute "$minute" DatePart Values(date::date_part_of);
    Second "$second" DatePart Values(date::date_part_of);
    Millisecond "$millisecond" DatePart Values(date::date_part_of);
    DayOfWeek "$dayOfWeek" DatePart Values(date::date_part_of);
    DayOfYear "$dayOfYear" DatePart Values(date::date_part_of);
    Week "$week" DatePart Values(date::date_part_of);
    IsoWeek "$isoWeek" DatePart Values(date::date_part_of);
    IsoWeekYear "$isoWeekYear" DatePart Values(date::date_part_of);
    IsoDayOfWeek "$isoDayOfWeek" DatePart Values(date::date_part_of);
    DateToParts "$dateToParts" Named(&["date", "timezone", "iso8601"]) Named(date::date_to_parts);
    DateFromParts "$dateFromParts" Named(&["year", "month", "day", "isoWeekYear", "isoWeek", "isoDayOfWeek", "hour", "minute", "second", "millisecond", "timezone"]) Named(date::date_from_parts);
    DateToString "$dateToString" Named(&["date", "format", "timezone", "onNull"]) Named(date_fmt::date_to_string);
    DateFromString "$dateFromString" Named(&["dateString", "format", "timezone", "onError", "onNull"]) Named(date_fmt::date_from_string);
    DateAdd "$dateAdd" Named(&["startDate", "unit", "amount", "timezone"]) Named(date_arith::date_add);
    DateSubtract "$dateSubtract" Named(&["startDate", "unit", "amount", "timezone"]) Named(date_arith::date_add);
    DateDiff "$dateDiff" Named(&["startDate", "endDate", "unit", "timezone", "startOfWeek"]) Named(date_arith::date_diff);
    DateTrunc "$dateTrunc" Named(&["date", "unit", "binSize", "timezone", "startOfWeek"]) Named(date_arith::date_trunc);
    SetUnion "$setUnion" Any Values(set::set_op);
    SetIntersection "$setIntersection" Any Values(set::set_op);
    SetDifference "$setDifference" Positional(2, 2) Values(set::set_op);
    SetEquals "$setEquals" Positional(2, usize::MAX) Values(set::set_op);
    SetIsSubset "$setIsSubset" Positional(2, 2) Values(set::set_op);
    AllElementsTrue "$allElementsTrue" Positional(1, 1) Values(set::all_any_element_true);
    AnyElementTrue "$anyElementTrue" Positional(1, 1) Values(set::all_any_element_true);
    Switch "$switch" Named(&["branches", "default"]) Named(cond::switch);
    Let "$let" Named(&["vars", "in"]) Named(cond::let_vars);
    Filter "$filter" Named(&["input", "as", "cond", "limit"]) Named(array::filter_map);
    Map "$map" Named(&["input", "as", "in"]) Named(array::filter_map);
    GetField "$getField" Named(&["field", "input"]) Named(object::get_field);
    SetField "$setField" Named(&["field", "input", "value"]) Named(object::set_field);
    UnsetField "$unsetField" Named(&["field", "input"]) Named(object::set_field);
    Zip "$zip" Named(&["inputs", "useLongestLength", "defaults"]) Named(array::zip);
    SortArray "$sortArray" Named(&["input", "sortBy"]) Named(array::sort_array);
    FirstN "$firstN" Named(&["input", "n"]) Named(array::n_elements);
    LastN "$lastN" Named(&["input", "n"]) Named(array::n_elements);
    MaxN "$maxN" Named(&["input", "n"]) Named(array::n_elements);
    MinN "$minN" Named(&["input", "n"]) Named(array::n_elements);
    Rand "$rand" Named(&[]) Named(array::rand);
    Reduce "$reduce" Named(&["input", "initialValue", "in"]) Named(array::reduce);
    Trim "$trim" Named(&["input", "chars"]) Named(string::trim);
    Ltrim "$ltrim" Named(&["input", "chars"]) Named(string::trim);
    Rtrim "$rtrim" Named(&["input", "chars"]) Named(string::trim);
    RegexMatch "$regexMatch" Named(&["input", "regex", "options"]) Named(string::regex_ops);
    RegexFind "$regexFind" Named(&["input", "regex", "options"]) Named(string::regex_ops);
    RegexFindAll "$regexFindAll" Named(&["input", "regex", "options"]) Named(string::regex_ops);
    ReplaceOne "$replaceOne" Named(&["input", "find", "replacement"]) Named(string::replace);
    ReplaceAll "$replaceAll" Named(&["input", "find", "replacement"]) Named(string::replace);
    IndexOfBytes "$indexOfBytes" Positional(2, 4) Values(string::index_of);
    IndexOfCP "$indexOfCP" Positional(2, 4) Values(string::index_of);
}

impl Op {
    /// The operator called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Op> {
        let i = TABLE.iter().position(|s| s.name == name)?;
        Some(ALL[i])
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub(super) fn spec(self) -> &'static Spec {
        &TABLE[self as usize]
    }

    /// Evaluates the operator with positional arguments.
    pub(super) fn eval(self, args: &[Expr], ctx: &Ctx) -> DocResult<Option<Bson>> {
        match self.spec().eval {
            Eval::Lazy(f) => f(self, args, ctx),
            Eval::Values(f) => {
                let vals: Vec<Option<Bson>> =
                    args.iter().map(|a| a.eval(ctx)).collect::<DocResult<_>>()?;
                f(self, &Args { vals: &vals }, ctx)
            }
            Eval::Named(_) => unreachable!("{} is parsed as a named operator", self.name()),
        }
    }

    /// Evaluates the operator with named arguments.
    pub(super) fn eval_named(self, args: &[(String, Expr)], ctx: &Ctx) -> DocResult<Option<Bson>> {
        match self.spec().eval {
            Eval::Named(f) => f(self, &NamedArgs { args }, ctx),
            _ => unreachable!("{} is parsed as a positional operator", self.name()),
        }
    }
}

/// Evaluated positional arguments (missing stays `None`, distinct from null).
pub(super) struct Args<'a> {
    pub vals: &'a [Option<Bson>],
}

impl Args<'_> {
    pub fn v(&self, i: usize) -> &Option<Bson> {
        &self.vals[i]
    }
    pub fn num(&self, i: usize) -> Option<Num> {
        self.vals[i].as_ref().and_then(Num::of)
    }
    pub fn any_null(&self) -> bool {
        self.vals.iter().any(is_nullish)
    }
}

/// Parsed named arguments of a named operator.
pub(super) struct NamedArgs<'a> {
    pub args: &'a [(String, Expr)],
}

impl NamedArgs<'_> {
    pub fn get(&self, k: &str) -> Option<&Expr> {
        self.args.iter().find(|(n, _)| n == k).map(|(_, e)| e)
    }
    /// Evaluates argument `k` (missing when it was not given).
    pub fn eval(&self, k: &str, ctx: &Ctx) -> DocResult<Option<Bson>> {
        match self.get(k) {
            Some(e) => e.eval(ctx),
            None => Ok(None),
        }
    }
    /// The variable name given by `as`, or `default`.
    pub fn as_name(&self, default: &str) -> String {
        match self.get("as") {
            Some(Expr::Lit(Bson::String(s))) => s.clone(),
            _ => default.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_match_variants() {
        assert_eq!(TABLE.len(), ALL.len());
        for (i, op) in ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
            assert_eq!(Op::from_name(op.name()), Some(*op));
        }
    }
}
