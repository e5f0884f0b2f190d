//! The integration tests of the generator, in one test binary (`cargo test -p acp-wire-gen
//! --test generator`): the wire-schema model and the generated modules over every upstream
//! snapshot (read from `../shared`; skipped when absent), schemas made to break it, and fuzzing.
//! One slow test is `#[ignore]`d: `cargo test -p acp-wire-gen --test generator -- --ignored`
//! compiles every snapshot's module (`.ci/run` runs it).

use test_support as common;

mod fuzz;
mod hostile;
mod upstream;
mod wire_model;
