// requantize: llama.cpp's llama_model_quantize() as its own llama-quantize tool calls it without an
// importance matrix, with nothing else around it. scripts/peers/build-llamacpp.sh --quantize builds
// this against the sdist's libllama alone: llama-quantize links llama.cpp's `common` library (chat
// templates, HTTP download, argument parsing), which is two thirds of that build's compile time and
// plays no part in quantization. The outputs are sha256-checked (scripts/model/make-quant-files.sh).
//
// usage: requantize IN.gguf OUT.gguf TYPE NTHREAD
//   TYPE: Q4_K_M Q5_K_M Q6_K Q8_0 Q2_K IQ4_XS (llama-quantize's names)
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct ftype_name {
    const char * name;
    llama_ftype ftype;
};

const ftype_name k_types[] = {
    {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},     {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},     {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
};

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s IN.gguf OUT.gguf TYPE NTHREAD\n", argv[0]);
        return 2;
    }
    llama_model_quantize_params params = llama_model_quantize_default_params();
    bool known = false;
    for (const ftype_name & t : k_types) {
        if (std::strcmp(argv[3], t.name) == 0) {
            params.ftype = t.ftype;
            known = true;
        }
    }
    char * end = nullptr;
    const long nthread = std::strtol(argv[4], &end, 10);
    if (!known || *end != '\0' || nthread < 1 || nthread > 256) {
        std::fprintf(stderr, "requantize: unknown type '%s' or bad thread count '%s'\n", argv[3], argv[4]);
        return 2;
    }
    params.nthread = (int) nthread;
    params.allow_requantize = true;  // the source file is itself quantized (Q4_1)

    llama_backend_init();
    const uint32_t rc = llama_model_quantize(argv[1], argv[2], &params);
    llama_backend_free();
    if (rc != 0) {
        std::fprintf(stderr, "requantize: llama_model_quantize failed (%u)\n", rc);
        return 1;
    }
    return 0;
}
