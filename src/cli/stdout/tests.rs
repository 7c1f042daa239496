use super::*;

struct Failing(io::ErrorKind);

impl Write for Failing {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::from(self.0))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_closed_pipe_is_a_clean_end_and_other_write_errors_are_errors() {
    assert!(write_to(&mut Failing(io::ErrorKind::BrokenPipe), "text").is_ok());
    let err = write_to(&mut Failing(io::ErrorKind::StorageFull), "text").expect_err("a full disk is an error");
    assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    let mut buffer = Vec::new();
    write_to(&mut buffer, "all of it").expect("a vector takes everything");
    assert_eq!(buffer, b"all of it");
}
