#include "template_model.h"

#include "gguf/file_bytes.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace demo_test {

void write_with_chat_template(const std::string &src, const std::string &dst, const std::string &chat_template) {
    using namespace specula::internal;
    const GgufFile in = GgufFile::parse(FileBytes::open(src, true));
    GgufWriter w;
    for (const auto &[key, value] : in.metadata()) w.set(key, value);
    w.set_string("tokenizer.chat_template", chat_template);
    for (const TensorInfo &t : in.tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.n_dims), std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    w.write_file(dst, in.alignment());
}

}  // namespace demo_test
