//! Grammars: JSON schemas into GBNF (docs/grammars.md). A grammar itself is a string in
//! [`SamplerOptions::grammar`](crate::SamplerOptions::grammar).

use std::os::raw::c_char;

use specula_sys as sys;

use crate::error::Result;
use crate::util;

/// The GBNF grammar of the JSON text a JSON schema admits (`specula_json_schema_to_grammar`, since 0.13), for
/// [`SamplerOptions::grammar`](crate::SamplerOptions::grammar). Errors: `InvalidArgument` (not JSON, not a schema),
/// `Unsupported` ("pattern").
pub fn json_schema_to_grammar(schema: &str) -> Result<String> {
    util::fetch_text(|buf, size, len, err| unsafe {
        sys::specula_json_schema_to_grammar(schema.as_ptr() as *const c_char, schema.len(), buf, size, len, err)
    })
}
