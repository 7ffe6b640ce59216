// The server's web page (webui/index.html, served at GET / unless --no-webui): a chat against /v1/chat/completions.
#pragma once

#include <string_view>

namespace specula_serve {

// The page's HTML, compiled in from webui/index.html (tools/serve/CMakeLists.txt).
std::string_view web_page_html();

}  // namespace specula_serve
