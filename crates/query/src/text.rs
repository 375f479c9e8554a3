//! Text search as mongod's text index version 3 has it: languages, the tokenizer (delimiters,
//! case folding, stop words, Snowball stemming, diacritic folding), the `$text` operand and its
//! parse into terms, phrases and negations, a text index's spec (`weights`,
//! `default_language`, `language_override`) with mongod's per-document term scores, and the
//! re-check of a fetched document against a query (phrases, negations, case and diacritic
//! sensitivity). No storage: the document layer turns [`TextSpec::doc_terms`] into index keys.
//!
//! Tokens: a run of characters between delimiters — the code points with the Unicode
//! properties White_Space, Dash, Hyphen, Quotation_Mark, Terminal_Punctuation, Pattern_Syntax
//! or STerm (mongod's list; its tables come from the same Unicode properties, here ICU4X's),
//! except that `'` is no delimiter in English. A token is lower-cased (Turkish: dotted and
//! dotless i), dropped when it is a stop word of the language (the Snowball lists, as NLTK
//! ships them), stemmed by the language's Snowball stemmer (`rust-stemmers`), then stripped
//! of diacritics (canonical decomposition, then every code point with the Diacritic property
//! removed).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::OnceLock;

use bson::{Bson, Document};
use icu_properties::props::{
    Dash, Diacritic, Hyphen, PatternSyntax, QuotationMark, SentenceTerminal, TerminalPunctuation,
    WhiteSpace,
};
use icu_properties::CodePointSetData;
use rust_stemmers::{Algorithm, Stemmer};

use crate::error::{DocError, DocResult};

/// The field a document carries its text score in between the text scan and the end of a find
/// or pipeline (`{$meta: "textScore"}` reads it). Stored documents cannot hold it: a
/// top-level `$`-prefixed field is refused on insert. It is removed before a result leaves.
pub const SCORE_FIELD: &str = "$textScore";

/// Whether a projection, sort or pipeline stage asks for `{$meta: "textScore"}` (a query or
/// pipeline without `$text` that does is refused: mongod's 40218).
pub fn mentions_text_score(v: &Bson) -> bool {
    fn walk(v: &Bson, depth: usize) -> bool {
        if depth > crate::limits::MAX_BSON_DEPTH {
            return false;
        }
        match v {
            Bson::Document(d) => {
                matches!(d.get("$meta"), Some(Bson::String(s)) if s == "textScore")
                    || d.values().any(|x| walk(x, depth + 1))
            }
            Bson::Array(a) => a.iter().any(|x| walk(x, depth + 1)),
            _ => false,
        }
    }
    walk(v, 0)
}

/// mongod's error for a text score asked of documents that have none.
pub fn no_text_score() -> DocError {
    DocError::with_code(
        40218,
        "Location40218",
        "query requires text score metadata, but it is not available",
    )
}

/// mongod's text index version.
pub const TEXT_INDEX_VERSION: i32 = 3;

/// mongod's bound on a field's weight (`MAX_WORD_WEIGHT`).
const MAX_WORD_WEIGHT: f64 = 100_000.0;

/// A text search language.
#[derive(Debug, PartialEq, Eq)]
pub struct Language {
    /// mongod's name (what listIndexes shows for `default_language`).
    pub name: &'static str,
    /// The ISO 639-1 code mongod also accepts.
    code: &'static str,
    stemmer: Option<Algorithm>,
}

macro_rules! lang {
    ($name:literal, $code:literal, $alg:expr) => {
        Language {
            name: $name,
            code: $code,
            stemmer: $alg,
        }
    };
}

/// mongod's languages for text index version 3 (and "none": no stop words, no stemming).
static LANGUAGES: &[Language] = &[
    lang!("danish", "da", Some(Algorithm::Danish)),
    lang!("dutch", "nl", Some(Algorithm::Dutch)),
    lang!("english", "en", Some(Algorithm::English)),
    lang!("finnish", "fi", Some(Algorithm::Finnish)),
    lang!("french", "fr", Some(Algorithm::French)),
    lang!("german", "de", Some(Algorithm::German)),
    lang!("hungarian", "hu", Some(Algorithm::Hungarian)),
    lang!("italian", "it", Some(Algorithm::Italian)),
    lang!("norwegian", "nb", Some(Algorithm::Norwegian)),
    lang!("portuguese", "pt", Some(Algorithm::Portuguese)),
    lang!("romanian", "ro", Some(Algorithm::Romanian)),
    lang!("russian", "ru", Some(Algorithm::Russian)),
    lang!("spanish", "es", Some(Algorithm::Spanish)),
    lang!("swedish", "sv", Some(Algorithm::Swedish)),
    lang!("turkish", "tr", Some(Algorithm::Turkish)),
    lang!("none", "none", None),
];

impl Language {
    /// A language by mongod's name or ISO code, case-insensitively.
    pub fn find(name: &str) -> Option<&'static Language> {
        LANGUAGES
            .iter()
            .find(|l| l.name.eq_ignore_ascii_case(name) || l.code.eq_ignore_ascii_case(name))
    }

    /// mongod's error for a language it does not know (BadValue).
    pub fn unsupported(name: &str) -> DocError {
        DocError::bad_value(format!(
            "unsupported language: \"{name}\" for text index version {TEXT_INDEX_VERSION}"
        ))
    }

    fn parse(name: &str) -> DocResult<&'static Language> {
        Self::find(name).ok_or_else(|| Self::unsupported(name))
    }

    fn stop_words(&self) -> &'static HashSet<&'static str> {
        static SETS: OnceLock<Vec<HashSet<&'static str>>> = OnceLock::new();
        let sets = SETS.get_or_init(|| {
            LANGUAGES
                .iter()
                .map(|l| match l.stemmer {
                    // NLTK's lists are the Snowball project's; "nb" is NLTK's "no".
                    Some(_) => stop_words::lookup(if l.code == "nb" { "no" } else { l.code })
                        .unwrap_or(&[])
                        .iter()
                        .copied()
                        .collect(),
                    None => HashSet::new(),
                })
                .collect()
        });
        let i = LANGUAGES
            .iter()
            .position(|l| std::ptr::eq(l, self))
            .expect("a language of the table");
        &sets[i]
    }

    fn english(&self) -> bool {
        self.name == "english"
    }

    fn turkish(&self) -> bool {
        self.name == "turkish"
    }
}

/// Whether `c` separates tokens (mongod's delimiter list; `'` is none in English).
pub fn is_delimiter(c: char, english: bool) -> bool {
    if c == '\'' {
        return !english;
    }
    CodePointSetData::new::<WhiteSpace>().contains(c)
        || CodePointSetData::new::<PatternSyntax>().contains(c)
        || CodePointSetData::new::<Dash>().contains(c)
        || CodePointSetData::new::<Hyphen>().contains(c)
        || CodePointSetData::new::<QuotationMark>().contains(c)
        || CodePointSetData::new::<TerminalPunctuation>().contains(c)
        || CodePointSetData::new::<SentenceTerminal>().contains(c)
}

/// Lower-cases as mongod's case folding does (Turkish maps `I` to dotless `ı`, `İ` to `i`).
pub fn fold_case(s: &str, turkish: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            'I' if turkish => out.push('ı'),
            'İ' => out.push('i'),
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

/// Removes diacritics: canonical decomposition, then every Diacritic code point dropped.
pub fn strip_diacritics(s: &str) -> String {
    let diacritic = CodePointSetData::new::<Diacritic>();
    if s.is_ascii() && !s.chars().any(|c| diacritic.contains(c)) {
        return s.to_string();
    }
    icu_normalizer::DecomposingNormalizerBorrowed::new_nfd()
        .normalize(s)
        .chars()
        .filter(|c| !diacritic.contains(*c))
        .collect()
}

/// How [`tokens`] treats each token.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TokenOptions {
    pub filter_stop_words: bool,
    pub case_sensitive: bool,
    pub diacritic_sensitive: bool,
}

/// The tokens of `text` in `lang` (see the module's comment for the steps). A token that the
/// steps leave empty (a lone combining mark) is dropped.
pub fn tokens(text: &str, lang: &Language, opts: TokenOptions) -> Vec<String> {
    let english = lang.english();
    let stemmer = lang.stemmer.map(Stemmer::create);
    let stop = opts.filter_stop_words.then(|| lang.stop_words());
    let mut out = Vec::new();
    for raw in text
        .split(|c: char| is_delimiter(c, english))
        .filter(|w| !w.is_empty())
    {
        let lower = fold_case(raw, lang.turkish());
        if stop.is_some_and(|s| s.contains(lower.as_str())) {
            continue;
        }
        let word = if opts.case_sensitive {
            raw.to_string()
        } else {
            lower
        };
        let stemmed = match &stemmer {
            Some(s) => s.stem(&word).into_owned(),
            None => word,
        };
        let token = if opts.diacritic_sensitive {
            stemmed
        } else {
            strip_diacritics(&stemmed)
        };
        if !token.is_empty() {
            out.push(token);
        }
    }
    out
}

/// Whether `phrase` occurs in `text` (mongod's phrase matcher: a substring, case-folded and
/// diacritic-stripped unless the query is sensitive to them).
pub fn phrase_matches(phrase: &str, text: &str, lang: &Language, case: bool, diac: bool) -> bool {
    let norm = |s: &str| {
        let s = if case {
            s.to_string()
        } else {
            fold_case(s, lang.turkish())
        };
        if diac {
            s
        } else {
            strip_diacritics(&s)
        }
    };
    norm(text).contains(&norm(phrase))
}

/// A `$text` operand as the query gave it (checked, not yet tokenized: the default language is
/// the index's).
#[derive(Clone, Debug, PartialEq)]
pub struct TextOperand {
    pub search: String,
    pub language: Option<String>,
    pub case_sensitive: bool,
    pub diacritic_sensitive: bool,
}

impl TextOperand {
    /// Parses `{$search, $language?, $caseSensitive?, $diacriticSensitive?}` with mongod's
    /// errors.
    pub fn parse(v: &Bson) -> DocResult<TextOperand> {
        let Bson::Document(d) = v else {
            return Err(DocError::bad_value("$text expects an object"));
        };
        let search = match d.get("$search") {
            None => return Err(DocError::failed_to_parse("$search required")),
            Some(Bson::String(s)) => s.clone(),
            Some(_) => return Err(DocError::type_mismatch("$search must be a string")),
        };
        let language = match d.get("$language") {
            None => None,
            Some(Bson::String(s)) => {
                Language::parse(s)?;
                Some(s.clone())
            }
            Some(_) => return Err(DocError::type_mismatch("$language must be a string")),
        };
        let flag = |k: &str| match d.get(k) {
            None => Ok(false),
            Some(Bson::Boolean(b)) => Ok(*b),
            Some(_) => Err(DocError::type_mismatch(format!("{k} must be a boolean"))),
        };
        let op = TextOperand {
            search,
            language,
            case_sensitive: flag("$caseSensitive")?,
            diacritic_sensitive: flag("$diacriticSensitive")?,
        };
        let known = 1
            + op.language.is_some() as usize
            + d.contains_key("$caseSensitive") as usize
            + d.contains_key("$diacriticSensitive") as usize;
        if d.len() != known {
            return Err(DocError::bad_value("extra fields in $text"));
        }
        Ok(op)
    }

    /// The query's terms and phrases in its language (`$language`, else `default`).
    pub fn resolve(&self, default: &'static Language) -> DocResult<TextQuery> {
        let lang = match &self.language {
            Some(l) => Language::parse(l)?,
            None => default,
        };
        let (positive, negative, phrases, negated_phrases) = split_search(&self.search);
        let bounds_opts = TokenOptions {
            filter_stop_words: true,
            ..Default::default()
        };
        let match_opts = TokenOptions {
            filter_stop_words: true,
            case_sensitive: self.case_sensitive,
            diacritic_sensitive: self.diacritic_sensitive,
        };
        Ok(TextQuery {
            language: lang,
            case_sensitive: self.case_sensitive,
            diacritic_sensitive: self.diacritic_sensitive,
            terms_for_bounds: tokens(&positive, lang, bounds_opts).into_iter().collect(),
            positive: tokens(&positive, lang, match_opts).into_iter().collect(),
            negated: tokens(&negative, lang, match_opts).into_iter().collect(),
            phrases,
            negated_phrases,
        })
    }
}

/// mongod's `$search` grammar: whitespace separates words; `"…"` is a phrase (its words are
/// positive terms too); `-` right after whitespace (or at the start) negates the word or
/// phrase it touches, until the next whitespace ("-foo-bar" negates both). Returns the
/// positive and negated word sentences and the positive and negated phrases.
fn split_search(search: &str) -> (String, String, Vec<String>, Vec<String>) {
    let (mut pos, mut neg) = (String::new(), String::new());
    let (mut phrases, mut neg_phrases) = (Vec::new(), Vec::new());
    let (mut in_negation, mut in_phrase) = (false, false);
    let mut quote_at = 0;
    let mut prev_ws = true;
    let mut chars = search.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_whitespace() {
            prev_ws = true;
            continue;
        }
        match c {
            '-' => {
                if !in_phrase && prev_ws {
                    in_negation = true;
                }
            }
            '"' => {
                if in_phrase {
                    let phrase = search[quote_at + 1..i].to_string();
                    if in_negation {
                        neg_phrases.push(phrase);
                    } else {
                        phrases.push(phrase);
                    }
                    in_phrase = false;
                } else {
                    in_phrase = true;
                    if in_negation && prev_ws {
                        in_negation = false;
                    }
                    quote_at = i;
                }
            }
            _ => {
                let start = i;
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if d.is_whitespace() || d == '-' || d == '"' {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                let word = &search[start..end];
                if !(in_phrase && in_negation) {
                    if in_negation && prev_ws {
                        in_negation = false;
                    }
                    let sentence = if in_negation { &mut neg } else { &mut pos };
                    sentence.push_str(word);
                    sentence.push(' ');
                }
            }
        }
        prev_ws = false;
    }
    (pos, neg, phrases, neg_phrases)
}

/// A `$text` query resolved against a text index's default language.
#[derive(Clone, Debug)]
pub struct TextQuery {
    pub language: &'static Language,
    pub case_sensitive: bool,
    pub diacritic_sensitive: bool,
    /// The index terms to look up (lower-cased, stemmed, diacritics stripped).
    pub terms_for_bounds: BTreeSet<String>,
    /// The terms a document must contain one of, as the query's sensitivity sees them.
    pub positive: BTreeSet<String>,
    pub negated: BTreeSet<String>,
    pub phrases: Vec<String>,
    pub negated_phrases: Vec<String>,
}

impl TextQuery {
    /// explain's `parsedTextQuery`.
    pub fn to_doc(&self) -> Document {
        bson::doc! {
            "terms": self.positive.iter().cloned().collect::<Vec<_>>(),
            "negatedTerms": self.negated.iter().cloned().collect::<Vec<_>>(),
            "phrases": self.phrases.clone(),
            "negatedPhrases": self.negated_phrases.clone(),
        }
    }
}

/// A text index's spec: which fields, their weights, the languages.
#[derive(Clone, Debug, PartialEq)]
pub struct TextSpec {
    /// Weighted paths (sorted, as mongod stores them).
    pub weights: BTreeMap<String, i32>,
    /// `$**`: every string in the document is indexed (weight 1 unless named in `weights`).
    pub wildcard: bool,
    pub default_language: &'static Language,
    pub language_override: String,
}

/// One string of a document a text index covers, with its weight and language.
struct TextValue<'a> {
    text: &'a str,
    weight: f64,
    language: &'static Language,
}

/// mongod's text index spec errors (their code names are "Location" and the code).
macro_rules! spec_err {
    ($code:literal, $msg:expr $(,)?) => {
        DocError::with_code($code, concat!("Location", stringify!($code)), $msg)
    };
}

impl TextSpec {
    /// Builds the spec from the text fields of a key pattern and the index options (mongod's
    /// `fixSpec` rules and errors). `weights` may name fields beyond the key's.
    pub fn parse(
        text_fields: &[String],
        weights: Option<&Bson>,
        default_language: Option<&Bson>,
        language_override: Option<&Bson>,
        version: Option<&Bson>,
    ) -> DocResult<TextSpec> {
        let mut map: BTreeMap<String, i32> = BTreeMap::new();
        let mut wildcard = false;
        for f in text_fields {
            if f == "$**" {
                wildcard = true;
            } else {
                map.insert(f.clone(), 1);
            }
        }
        match weights {
            None => {}
            Some(Bson::Document(w)) => {
                for (k, v) in w {
                    let n = crate::compare::Num::of(v)
                        .ok_or_else(|| {
                            spec_err!(17283, "weight for text index needs numeric type")
                        })?
                        .as_f64();
                    if !(1.0..MAX_WORD_WEIGHT).contains(&n) {
                        return Err(spec_err!(16674, "score for word too high"));
                    }
                    if k == "$**" {
                        wildcard = true;
                        continue;
                    }
                    if k.split('.').any(str::is_empty) {
                        return Err(spec_err!(17291, "weight cannot have empty path component"));
                    }
                    if k.split('.').any(|p| p.starts_with('$')) {
                        return Err(spec_err!(
                            17292,
                            "weight cannot have path component with $ prefix",
                        ));
                    }
                    map.insert(k.clone(), n as i32);
                }
            }
            Some(Bson::String(s)) if s == "$**" => wildcard = true,
            Some(_) => {
                return Err(spec_err!(
                    17284,
                    "text index option 'weights' must be an object",
                ))
            }
        }
        let default_language = match default_language {
            None => Language::find("english").expect("english"),
            Some(Bson::String(s)) => Language::find(s).ok_or_else(|| {
                spec_err!(
                    17264,
                    format!("default_language is not valid: \"{s}\" is not a supported language"),
                )
            })?,
            Some(_) => return Err(spec_err!(17263, "default_language needs a string type")),
        };
        let language_override = match language_override {
            None => "language".to_string(),
            Some(Bson::String(s)) if !s.is_empty() && !s.starts_with('$') && !s.contains('.') => {
                s.clone()
            }
            Some(_) => return Err(spec_err!(17136, "language_override is not valid")),
        };
        match version {
            None => {}
            Some(v) => match crate::compare::Num::of(v).and_then(|n| n.as_i64_exact()) {
                Some(3) => {}
                Some(n) => {
                    return Err(spec_err!(
                        17364,
                        format!(
                            "attempt to use unsupported textIndexVersion {n}; versions supported: 3"
                        ),
                    ))
                }
                None => {
                    return Err(spec_err!(
                        17293,
                        "text index option 'textIndexVersion' must be a number",
                    ))
                }
            },
        }
        Ok(TextSpec {
            weights: map,
            wildcard,
            default_language,
            language_override,
        })
    }

    /// The options as listIndexes shows them.
    pub fn spec_fields(&self) -> Document {
        let mut w = Document::new();
        if self.wildcard {
            w.insert("$**", 1);
        }
        for (k, v) in &self.weights {
            w.insert(k.clone(), *v);
        }
        bson::doc! {
            "weights": w,
            "default_language": self.default_language.name,
            "language_override": self.language_override.clone(),
            "textIndexVersion": TEXT_INDEX_VERSION,
        }
    }

    /// The language of a (sub)document: its override field, else the enclosing one's.
    fn language_of(
        &self,
        d: &Document,
        inherited: &'static Language,
    ) -> DocResult<&'static Language> {
        match d.get(&self.language_override) {
            None => Ok(inherited),
            Some(Bson::String(s)) => Language::find(s)
                .ok_or_else(|| spec_err!(17262, format!("language override unsupported: {s}"))),
            Some(_) => Err(spec_err!(
                17261,
                "found language override field in document with non-string type",
            )),
        }
    }

    fn weight_of(&self, path: &str) -> Option<f64> {
        match self.weights.get(path) {
            Some(w) => Some(*w as f64),
            None if self.wildcard => Some(1.0),
            None => None,
        }
    }

    /// Whether a subdocument at `path` can hold an indexed field.
    fn may_descend(&self, path: &str) -> bool {
        self.wildcard
            || self.weights.keys().any(|k| {
                k.len() > path.len() && k.starts_with(path) && k.as_bytes()[path.len()] == b'.'
            })
    }

    /// Every indexed string of a document, in document order (bounded by the document's own
    /// nesting, which `limits` caps).
    fn values<'a>(&self, doc: &'a Document) -> DocResult<Vec<TextValue<'a>>> {
        let mut out = Vec::new();
        let lang = self.language_of(doc, self.default_language)?;
        self.walk(doc, "", lang, &mut out)?;
        Ok(out)
    }

    fn walk<'a>(
        &self,
        d: &'a Document,
        prefix: &str,
        lang: &'static Language,
        out: &mut Vec<TextValue<'a>>,
    ) -> DocResult<()> {
        for (k, v) in d {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            self.value(v, &path, lang, out)?;
        }
        Ok(())
    }

    fn value<'a>(
        &self,
        v: &'a Bson,
        path: &str,
        lang: &'static Language,
        out: &mut Vec<TextValue<'a>>,
    ) -> DocResult<()> {
        match v {
            Bson::String(s) => {
                if let Some(weight) = self.weight_of(path) {
                    out.push(TextValue {
                        text: s,
                        weight,
                        language: lang,
                    });
                }
            }
            Bson::Document(sub) if self.may_descend(path) => {
                let lang = self.language_of(sub, lang)?;
                self.walk(sub, path, lang, out)?;
            }
            Bson::Array(a) => {
                for e in a {
                    self.value(e, path, lang, out)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A document's index terms with mongod's scores: per string, each term's frequency (the
    /// n-th repeat adds 1/2^(n-1)) times the field's weight times a length coefficient
    /// (0.5 + 0.5 × the term's share of the string's tokens), × 1.1 when the term is the whole
    /// string; summed over the document's strings.
    pub fn doc_terms(&self, doc: &Document) -> DocResult<BTreeMap<String, f64>> {
        let mut scores: BTreeMap<String, f64> = BTreeMap::new();
        for v in self.values(doc)? {
            score_string(v.text, v.language, v.weight, &mut scores);
        }
        Ok(scores)
    }

    /// Whether a document fetched for `q`'s terms matches it: one positive term (as the
    /// query's sensitivity sees it), no negated term, every phrase and no negated phrase.
    pub fn matches(&self, doc: &Document, q: &TextQuery) -> DocResult<bool> {
        let values = self.values(doc)?;
        let opts = TokenOptions {
            filter_stop_words: false,
            case_sensitive: q.case_sensitive,
            diacritic_sensitive: q.diacritic_sensitive,
        };
        let mut positive = false;
        for v in &values {
            for t in tokens(v.text, v.language, opts) {
                if q.negated.contains(&t) {
                    return Ok(false);
                }
                positive |= q.positive.contains(&t);
            }
        }
        if !positive {
            return Ok(false);
        }
        let found = |p: &str| {
            values.iter().any(|v| {
                phrase_matches(
                    p,
                    v.text,
                    v.language,
                    q.case_sensitive,
                    q.diacritic_sensitive,
                )
            })
        };
        Ok(q.phrases.iter().all(|p| found(p)) && !q.negated_phrases.iter().any(|p| found(p)))
    }
}

fn score_string(raw: &str, lang: &Language, weight: f64, scores: &mut BTreeMap<String, f64>) {
    let opts = TokenOptions {
        filter_stop_words: true,
        ..Default::default()
    };
    // (count, frequency, the next repeat's divisor)
    let mut terms: BTreeMap<String, (u32, f64, f64)> = BTreeMap::new();
    let mut n = 0u32;
    for t in tokens(raw, lang, opts) {
        let e = terms.entry(t).or_insert((0, 0.0, 1.0));
        e.0 += 1;
        e.1 += 1.0 / e.2;
        e.2 *= 2.0;
        n += 1;
    }
    for (term, (count, freq, _)) in terms {
        let coeff = 0.5 * count as f64 / n as f64 + 0.5;
        let adjustment = if raw.len() == term.len() && raw.eq_ignore_ascii_case(&term) {
            1.1
        } else {
            1.0
        };
        *scores.entry(term).or_insert(0.0) += weight * freq * coeff * adjustment;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use proptest::prelude::*;

    fn en() -> &'static Language {
        Language::find("english").unwrap()
    }

    fn toks(s: &str) -> Vec<String> {
        tokens(
            s,
            en(),
            TokenOptions {
                filter_stop_words: true,
                ..Default::default()
            },
        )
    }

    #[test]
    fn english_tokens_stem_fold_and_drop_stop_words() {
        assert_eq!(
            toks("The Quick brown foxes, jumping!"),
            ["quick", "brown", "fox", "jump"]
        );
        // Apostrophes join words in English; diacritics go after stemming.
        assert_eq!(toks("dog's café"), ["dog", "cafe"]);
        assert_eq!(toks("a-b_c"), ["b_c"]);
        let fr = Language::find("fr").unwrap();
        assert_eq!(tokens("l'été", fr, TokenOptions::default()), ["l", "ete"]);
        assert!(Language::find("klingon").is_none());
        assert_eq!(Language::find("ES").unwrap().name, "spanish");
        let tr = Language::find("turkish").unwrap();
        assert_eq!(fold_case("Iİ", tr.turkish()), "ıi");
    }

    #[test]
    fn search_grammar() {
        let (p, n, ph, nph) = split_search("coffee -shop \"cafe con leche\" -\"bad day\" -a-b c");
        assert_eq!(p, "coffee cafe con leche c ");
        assert_eq!(n, "shop a b ");
        assert_eq!(ph, ["cafe con leche"]);
        assert_eq!(nph, ["bad day"]);
        // A dash after a word or inside a phrase negates nothing.
        let (p, n, _, _) = split_search("pre-war \"x -y\"");
        assert_eq!((p.as_str(), n.as_str()), ("pre war x y ", ""));
    }

    #[test]
    fn scores_follow_mongods_formula() {
        let spec = TextSpec::parse(
            &["title".into(), "body".into()],
            Some(&Bson::Document(doc! {"title": 10})),
            None,
            None,
            None,
        )
        .unwrap();
        let t = spec
            .doc_terms(&doc! {"title": "Shop", "body": "coffee and more coffee shops"})
            .unwrap();
        // body: "and" and "more" are stop words; coffee ×2 of 3 tokens: frequency 1 + 1/2,
        // coefficient 0.5 × 2/3 + 0.5 → 1.25; shop: 1 × (0.5 × 1/3 + 0.5).
        // title (weight 10): one token equal to the whole string: 10 × 1 × 1 × 1.1.
        assert!((t["coffe"] - 1.25).abs() < 1e-9, "{t:?}");
        assert!((t["shop"] - (11.0 + 2.0 / 3.0)).abs() < 1e-9, "{t:?}");
        assert!(!t.contains_key("and"));
    }

    #[test]
    fn matcher_phrases_negations_and_language_override() {
        let spec = TextSpec::parse(&["$**".into()], None, None, None, None).unwrap();
        let q = |s: &str| {
            TextOperand::parse(&Bson::Document(doc! {"$search": s}))
                .unwrap()
                .resolve(spec.default_language)
                .unwrap()
        };
        let d = doc! {"a": "Coffee shop downtown", "n": {"b": "best Espresso"}};
        assert!(spec.matches(&d, &q("espresso")).unwrap());
        assert!(!spec.matches(&d, &q("espresso -downtown")).unwrap());
        assert!(spec.matches(&d, &q("\"coffee shop\"")).unwrap());
        assert!(!spec.matches(&d, &q("\"shop coffee\"")).unwrap());
        assert!(!spec.matches(&d, &q("coffee -\"best espresso\"")).unwrap());
        let es = doc! {"language": "spanish", "t": "las tiendas"};
        let terms = spec.doc_terms(&es).unwrap();
        assert!(
            terms.contains_key("tiend") && !terms.contains_key("las"),
            "{terms:?}"
        );
        assert_eq!(
            spec.doc_terms(&doc! {"language": "klingon"})
                .unwrap_err()
                .code,
            17262
        );
        let e = |d: Document| TextOperand::parse(&Bson::Document(d)).unwrap_err().code;
        assert_eq!(e(doc! {}), 9);
        assert_eq!(e(doc! {"$search": 1}), 14);
        assert_eq!(e(doc! {"$search": "x", "$language": "xx"}), 2);
        assert_eq!(e(doc! {"$search": "x", "$bogus": 1}), 2);
        assert_eq!(e(doc! {"$search": "x", "$caseSensitive": 1}), 14);
    }

    proptest! {
        #[test]
        fn tokens_are_nonempty_folded_and_never_delimiters(s in "\\PC{0,40}") {
            for t in toks(&s) {
                prop_assert!(!t.is_empty());
                prop_assert!(!t.chars().any(|c| is_delimiter(c, true)), "{t:?}");
                prop_assert_eq!(strip_diacritics(&t), t.clone());
            }
        }

        #[test]
        fn tokenizing_tokens_again_changes_nothing_but_stemming(s in "[a-zA-Zéèà' ,.-]{0,60}") {
            let none = Language::find("none").unwrap();
            let opts = TokenOptions::default();
            let once = tokens(&s, none, opts);
            let twice = tokens(&once.join(" "), none, opts);
            prop_assert_eq!(once, twice);
        }
    }
}
