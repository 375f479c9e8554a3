use super::*;

fn matches(pattern: &str, options: &str, subject: &str) -> bool {
    compile_regex(pattern, options)
        .unwrap_or_else(|e| panic!("{pattern}: {e:?}"))
        .is_match(subject)
}

fn first(pattern: &str, subject: &str) -> Vec<Option<String>> {
    let c = compile_regex(pattern, "")
        .unwrap()
        .captures_at(subject, 0, "$regexFind")
        .unwrap()
        .expect("a match");
    c.groups
        .iter()
        .map(|g| g.map(|(s, e)| subject[s..e].to_string()))
        .collect()
}

#[test]
fn pcre_syntax_the_rust_engine_refused() {
    // Lookahead and lookbehind, positive and negative.
    assert!(matches("foo(?=bar)", "", "foobar"));
    assert!(!matches("foo(?=bar)", "", "foobaz"));
    assert!(matches("foo(?!bar)", "", "foobaz"));
    assert!(matches("(?<=\\$)\\d+", "", "cost $42"));
    assert!(!matches("(?<!\\$)\\b\\d+", "", "$42"));
    // Backreferences, numbered and named.
    assert!(matches("^(\\w+) \\1$", "", "hey hey"));
    assert!(!matches("^(\\w+) \\1$", "", "hey you"));
    assert!(matches("^(?P<w>\\w)(?P=w)$", "", "zz"));
    assert!(matches("^(?<w>\\w)\\k<w>$", "", "qq"));
    // Possessive quantifiers and atomic groups give up no characters.
    assert!(!matches("^a++a", "", "aaaa"));
    assert!(!matches("^(?>a+)a", "", "aaaa"));
    assert!(matches("^a+a", "", "aaaa"));
    // \Q…\E quotes metacharacters.
    assert!(matches("^\\Qa.b*c\\E$", "", "a.b*c"));
    assert!(!matches("^\\Qa.b*c\\E$", "", "axbbc"));
    // Inline options, scoped and global.
    assert!(matches("(?i)hello", "", "HeLLo"));
    assert!(matches("a(?i:B)c", "", "abc"));
    assert!(!matches("a(?i:B)c", "", "abC"));
    // \h (horizontal space), recursion, conditionals.
    assert!(matches("a\\hb", "", "a\tb"));
    assert!(matches("^(\\((?1)*\\))$", "", "(()(()))"));
    assert!(!matches("^(\\((?1)*\\))$", "", "(()"));
    assert!(matches("^(<)?x(?(1)>)$", "", "<x>"));
    assert!(!matches("^(<)?x(?(1)>)$", "", "<x"));
}

#[test]
fn named_groups_are_captured_by_number() {
    assert_eq!(
        first("(?<year>\\d{4})-(?P<month>\\d\\d)", "on 2024-05"),
        vec![
            Some("2024-05".into()),
            Some("2024".into()),
            Some("05".into())
        ]
    );
    assert_eq!(
        first("(a)|(b)", "b"),
        vec![Some("b".into()), None, Some("b".into())]
    );
}

#[test]
fn options_as_mongod_maps_them() {
    assert!(matches("WORLD", "i", "hello world"));
    assert!(matches("^b", "m", "a\nb"));
    assert!(!matches("^b", "", "a\nb"));
    assert!(matches("a.b", "s", "a\nb"));
    assert!(!matches("a.b", "", "a\nb"));
    assert!(matches("a b c # comment", "x", "abc"));
    assert!(matches("é", "u", "café"));
    // UTF mode: `.` is one character, case folding is Unicode's; \w stays ASCII as in mongod.
    assert!(matches("^caf.$", "", "café"));
    assert!(matches("ÉCOLE", "i", "école"));
    assert!(!matches("^\\w$", "", "é"));
    let e = compile_regex("a", "iq").unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (51108, "invalid flag in regex options: q")
    );
}

#[test]
fn bad_patterns_are_mongods_51091() {
    for (pattern, reason) in [
        ("[)", "missing terminating ] for character class"),
        ("(abc", "missing closing parenthesis"),
        ("a{2,1}", "numbers out of order in {} quantifier"),
        (
            "(?<n>a)(?<n>b)",
            "two named subpatterns have the same name (PCRE2_DUPNAMES not set)",
        ),
    ] {
        let e = compile_regex(pattern, "").unwrap_err();
        assert_eq!(e.code, 51091, "{pattern}");
        assert_eq!(
            e.message,
            format!("Regular expression is invalid: {reason}")
        );
    }
    assert_eq!(compile_regex("ab\0c", "").unwrap_err().code, 2);
    let long = "a".repeat(MAX_PATTERN_BYTES + 1);
    assert_eq!(compile_regex(&long, "").unwrap_err().code, 51091);
}

/// `(a+)+$` against a long run of `a`s that does not end the subject backtracks through
/// 2^n splits: without a limit this match would run for longer than the universe has
/// existed. With the limit it stops, and each caller answers as mongod does.
#[test]
fn catastrophic_backtracking_stops_at_the_limit() {
    let re = compile_regex("(a+)+$", "").unwrap();
    let subject = format!("{}!", "a".repeat(64));
    assert!(
        !re.is_match(&subject),
        "the matcher treats a stopped match as no match"
    );
    let e = re.captures_at(&subject, 0, "$regexMatch").unwrap_err();
    assert_eq!(e.code, 51156);
    assert_eq!(
        e.message,
        "Error occurred while executing the regular expression in $regexMatch. Result code: \
         match limit exceeded"
    );
    // The same pattern on a subject it can match still matches.
    assert!(re.is_match(&"a".repeat(64)));
}

#[test]
fn a_pattern_cannot_raise_the_limit() {
    let re = compile_regex("(*LIMIT_MATCH=4000000000)(a+)+$", "").unwrap();
    let subject = format!("{}!", "a".repeat(64));
    assert!(re.captures_at(&subject, 0, "$regexFind").is_err());
}

#[test]
fn find_all_steps_over_empty_matches_by_character() {
    let re = compile_regex("x*", "").unwrap();
    let mut spans = Vec::new();
    re.for_each_match("éxx", "$regexFindAll", |c| {
        spans.push(c.span());
        Ok(())
    })
    .unwrap();
    assert_eq!(spans, vec![(0, 0), (2, 4), (4, 4)]);
    // A later match sees the text before it (lookbehind across the previous match).
    let re = compile_regex("(?<=a)b", "").unwrap();
    let mut n = 0;
    re.for_each_match("abab", "$regexFindAll", |_| {
        n += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(n, 2);
}

#[test]
fn the_cache_answers_as_a_fresh_compile() {
    let a = compile_regex_cached("^(\\w)\\1", "i").unwrap();
    let b = compile_regex_cached("^(\\w)\\1", "i").unwrap();
    assert!(a.is_match("Aa") && b.is_match("Aa"));
    assert!(!compile_regex_cached("^(\\w)\\1", "")
        .unwrap()
        .is_match("Aa"));
    for i in 0..(CACHED_PATTERNS * 2) {
        assert!(compile_regex_cached(&format!("^x{i}$"), "")
            .unwrap()
            .is_match(&format!("x{i}")));
    }
    assert_eq!(compile_regex_cached("(", "").unwrap_err().code, 51091);
}
