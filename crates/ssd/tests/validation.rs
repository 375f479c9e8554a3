//! The validation of `flashdoc ssd validate`, at a size that runs in seconds: every case must
//! agree with its analytical reference within the stated tolerance (5 % for "≈" rows).

#[test]
fn quick_validation_matches_theory() {
    let size = ssd::validate::Size::quick();
    let r = ssd::validate::run(&size, 42, &mut |_, _, _| {});
    let table = ssd::validate::render(&r);
    println!("{table}");
    assert!(r.rows.len() >= 15);
    for row in &r.rows {
        assert!(row.pass, "case failed: {row:?}\n{table}");
    }
    assert!(r.all_pass);
}
