/* chat_test.c: chat templates: SmolLM2's template (copied from its GGUF), a Qwen-style one (its
 * default system message inside an escaped string literal), a plain ChatML one, and templates that
 * are not ChatML; Gemma's turns; then the real SmolLM2 file through the engine when it is present.
 * EVIDENCE: C-ENG-010, C-GEM-006 */
#include <stdio.h>
#include <string.h>

#include "engine/chat.h"
#include "ferrite.h"
#include "testing/check.h"

static const char SMOLLM2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n"
    "' + message['content'] + '<|im_end|>' + '\n"
    "'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n"
    "' }}{% endif %}";

static const char QWEN[] =
    "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}{{- '<|im_start|>' + "
    "message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endfor %}";

static const char PLAIN[] =
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}";

static const char LLAMA3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}";

static const char WANT_SMOLLM2[] =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";

static void render_is(const feri_chat_format *f, const fer_chat_message *m, size_t n, uint32_t flags, const char *want) {
  char out[1024];
  size_t len = 0;
  CHECK_STATUS(feri_chat_render(f, m, n, flags, out, sizeof out, &len), FER_STATUS_OK);
  CHECK(len == strlen(want) && strcmp(out, want) == 0);
  if (strcmp(out, want) != 0) fprintf(stderr, "  got  '%s'\n  want '%s'\n", out, want);
}

int main(void) {
  feri_chat_format f;
  const fer_chat_message user = {"user", "What is the capital of France?"};
  const fer_chat_message with_system[2] = {{"system", "Be brief."}, {"user", "Hi"}};
  CHECK_STATUS(feri_chat_format_parse(SMOLLM2, sizeof SMOLLM2 - 1, &f), FER_STATUS_OK);
  CHECK(f.chatml && strcmp(f.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face") == 0);
  render_is(&f, &user, 1, FER_CHAT_ADD_GENERATION_PROMPT, WANT_SMOLLM2);
  render_is(&f, with_system, 2, 0, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  /* BUFFER_TOO_SMALL names the length; a buffer of exactly length + 1 is enough */
  char small[16];
  size_t need = 0;
  CHECK_STATUS(feri_chat_render(&f, &user, 1, FER_CHAT_ADD_GENERATION_PROMPT, small, sizeof small, &need),
               FER_STATUS_BUFFER_TOO_SMALL);
  CHECK(need == strlen(WANT_SMOLLM2));
  memset(small, 'x', sizeof small);
  CHECK_STATUS(feri_chat_render(&f, &user, 1, FER_CHAT_ADD_GENERATION_PROMPT, small, sizeof small, &need),
               FER_STATUS_BUFFER_TOO_SMALL);
  for (size_t i = 0; i < sizeof small; i++) CHECK(small[i] == 'x'); /* a short buffer is left as it was */
  char exact[sizeof WANT_SMOLLM2];
  CHECK_STATUS(feri_chat_render(&f, &user, 1, FER_CHAT_ADD_GENERATION_PROMPT, exact, sizeof exact, &need), FER_STATUS_OK);
  CHECK_STATUS(feri_chat_render(&f, &user, 1, 0x80, exact, sizeof exact, &need), FER_STATUS_INVALID_ARG);
  const fer_chat_message null_role = {NULL, "x"};
  CHECK_STATUS(feri_chat_render(&f, &null_role, 1, 0, exact, sizeof exact, &need), FER_STATUS_NULL_ARG);

  CHECK_STATUS(feri_chat_format_parse(QWEN, sizeof QWEN - 1, &f), FER_STATUS_OK);
  CHECK(strcmp(f.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.") == 0);
  render_is(&f, &with_system[1], 1, 0,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n");
  CHECK_STATUS(feri_chat_format_parse(PLAIN, sizeof PLAIN - 1, &f), FER_STATUS_OK);
  CHECK(f.default_system[0] == '\0');
  render_is(&f, &with_system[1], 1, FER_CHAT_ADD_GENERATION_PROMPT, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

  CHECK_STATUS(feri_chat_format_parse(LLAMA3, sizeof LLAMA3 - 1, &f), FER_STATUS_UNSUPPORTED);
  char msg[512];
  size_t len;
  fer_last_error_message(msg, sizeof msg, &len);
  CHECK(strstr(msg, "neither ChatML") && strstr(msg, "{% set loop_messages"));
  CHECK_STATUS(feri_chat_format_parse(NULL, 0, &f), FER_STATUS_UNSUPPORTED);

  /* Gemma's turns (C-GEM-006), as llama.cpp's "gemma" format renders them: from the template's
   * markers (Gemma 3's own template, abridged), or from the architecture when the file has none
   * (the Gemma 3 270M GGUF) */
  static const char GEMMA[] =
      "{{ bos_token }}{%- for message in loop_messages -%}{%- if (message['role'] == 'assistant') -%}{%- set role = "
      "\"model\" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + "
      "(first_user_prefix if loop.first else \"\") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor "
      "-%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}";
  CHECK_STATUS(feri_chat_format_parse(GEMMA, sizeof GEMMA - 1, &f), FER_STATUS_OK);
  CHECK(f.kind == FERI_CHAT_GEMMA && !f.chatml);
  render_is(&f, &user, 1, FER_CHAT_ADD_GENERATION_PROMPT,
            "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n");
  const fer_chat_message convo[5] = {{"system", "  Be brief. "},
                                     {"user", "\nHi\t"},
                                     {"assistant", "Hello."},
                                     {"system", "Answer in French."},
                                     {"user", "Capital?"}};
  render_is(&f, convo, 5, FER_CHAT_ADD_GENERATION_PROMPT,
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nAnswer in French.\n\nCapital?<end_of_turn>\n<start_of_turn>model\n");
  const fer_chat_message blank_system[2] = {{"system", " \n"}, {"user", "Hi"}};
  render_is(&f, blank_system, 2, 0, "<start_of_turn>user\nHi<end_of_turn>\n");
  CHECK_STATUS(feri_chat_format_for(NULL, 0, "gemma3", 6, &f), FER_STATUS_OK);
  CHECK(f.kind == FERI_CHAT_GEMMA);
  CHECK_STATUS(feri_chat_format_for(NULL, 0, "llama", 5, &f), FER_STATUS_UNSUPPORTED);
  CHECK_STATUS(feri_chat_format_for(SMOLLM2, sizeof SMOLLM2 - 1, "gemma3", 6, &f), FER_STATUS_OK);
  CHECK(f.kind == FERI_CHAT_CHATML); /* a template in the file wins */

  /* the real model's template through the engine */
  char path[4096];
  if (!feri_test_data_path("smollm2-135m-instruct-q4_1.gguf", path, sizeof path)) {
    printf("SKIPPED: chat_test: the SmolLM2 file is not here\n");
    return feri_test_finish("chat_test");
  }
  fer_engine_config c;
  fer_engine_config_init(&c);
  c.model_path = path;
  c.n_threads = 1;
  fer_engine *e = NULL;
  CHECK_STATUS(fer_engine_create(&c, &e), FER_STATUS_OK);
  char out[1024];
  if (e) {
    CHECK_STATUS(fer_engine_chat_render(e, &user, 1, FER_CHAT_ADD_GENERATION_PROMPT, out, sizeof out, &len), FER_STATUS_OK);
    CHECK(strcmp(out, WANT_SMOLLM2) == 0);
    fer_model_info info;
    fer_engine_model_info(e, &info);
    CHECK(info.eot_id == 2 && info.eos_id == 2 && strcmp(info.architecture, "llama") == 0);
  }
  fer_engine_free(e);
  return feri_test_finish("chat_test");
}
