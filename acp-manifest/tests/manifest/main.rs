//! The integration tests of the manifest library, in one test binary (`cargo test -p
//! acp-manifest --test manifest`): the corpus of `tests/manifests`, the differential tests
//! against the published AIP-44 schema (read from `../shared`; skipped when absent), the
//! references in `docs/` against the library, fuzzing, and the dependency tree it keeps lean.

mod common;
mod corpus;
mod dependencies;
mod docs_reference;
mod fuzz;
mod upstream_schema;
