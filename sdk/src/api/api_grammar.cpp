// specula_json_schema_to_grammar: JSON schemas into GBNF grammars (grammar/json_schema.h).
#include "handles.h"

#include "grammar/json_schema.h"

using namespace specula::internal;

extern "C" {

specula_status specula_json_schema_to_grammar(const char *schema, size_t len, char *buf, size_t buf_size, size_t *grammar_len,
                                              specula_error **err) {
    return guarded(err, [&] {
        require_arg(schema != nullptr || len == 0, "schema is NULL");
        copy_text(json_schema_to_grammar(std::string_view(schema == nullptr ? "" : schema, len)), buf, buf_size, grammar_len);
    });
}

}  // extern "C"
