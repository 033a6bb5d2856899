/* ferrite.c: the `ferrite` program: `ferrite info`, `generate`, `chat-template`, `tiny-model` and
 * `tokenize`. */
#include <stdio.h>
#include <string.h>

#include "tools/args.h"
#include "tools/commands.h"

static void usage(FILE *f) {
  feri_arg_usage(f, feri_info_usage, true);
  feri_arg_usage(f, feri_generate_usage, false);
  feri_arg_usage(f, feri_chat_template_usage, false);
  feri_arg_usage(f, feri_tiny_model_usage, false);
  feri_arg_usage(f, feri_tokenize_usage, false);
  feri_arg_usage(f, "ferrite COMMAND --help     (or -h) a command's usage and the ranges of its values\n", false);
}

int main(int argc, char **argv) {
  static const struct { const char *name; int (*run)(int, char **); } commands[] = {
      {"info", feri_cmd_info}, {"generate", feri_cmd_generate}, {"chat-template", feri_cmd_chat_template},
      {"tiny-model", feri_cmd_tiny_model},
      {"tokenize", feri_cmd_tokenize}};
  if (argc >= 2) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
      if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    if (feri_arg_is_help(argv[1])) {
      usage(stdout);
      return 0;
    }
    fprintf(stderr, "ferrite: unknown command \"%s\"\n", argv[1]);
  }
  usage(stderr);
  return 2;
}
