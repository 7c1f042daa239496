use std::io::Write as _;

use super::*;

#[test]
fn a_capture_keeps_what_every_clone_writes_and_parses_the_json_lines() {
    let capture = LogCapture::default();
    let mut writer = capture.make_writer();
    writer.write_all(b"{\"a\":1}\nnot json\n").expect("write");
    capture.clone().write_all(b"{\"b\":2}\n").expect("write");
    assert_eq!(capture.text(), "{\"a\":1}\nnot json\n{\"b\":2}\n");
    assert_eq!(
        capture.json_lines(),
        [serde_json::json!({"a": 1}), serde_json::json!({"b": 2})]
    );
}
