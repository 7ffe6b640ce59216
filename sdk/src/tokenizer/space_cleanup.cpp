#include "tokenizer/space_cleanup.h"

#include <cstdint>

namespace specula::internal {

// llama.cpp's clean_up_tokenization_spaces passes, transcribed over the same in-place buffer so that their
// quirks (a pass reads bytes an earlier step of the same pass has already rewritten) carry over exactly.
void clean_up_spaces(std::string &s) {
    char *text = s.data();
    int64_t total = int64_t(s.size());

    // " ?", " !", " .", " ," lose their space
    const int64_t total1 = total;
    total = total ? 1 : 0;
    for (int64_t i = 1; i < total1; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }

    // " ' " becomes "'"
    const int64_t total2 = total;
    total = total ? 1 : 0;
    for (int64_t i = 1; i < total2; ++i) {
        const char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }

    // " 's", " 'm", " 're", " 've" lose their space
    const int64_t total3 = total;
    total = total ? 1 : 0;
    for (int64_t i = 1; i < total3; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            const char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
                const char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    s.resize(size_t(total));
}

}  // namespace specula::internal
