/* commands.h: the subcommands of the `ferrite` program. Each takes -h/--help (its usage on stdout,
 * exit 0), exits 2 on a usage error (a message naming the option and the value on stderr) and 1
 * when the work itself fails. */
#ifndef FERI_TOOLS_COMMANDS_H
#define FERI_TOOLS_COMMANDS_H

/* Each command's usage: lines starting "ferrite COMMAND", continuations indented under them
 * (printed by feri_arg_usage). ferrite.c prints them all for `ferrite --help`. */
extern const char feri_info_usage[];
extern const char feri_generate_usage[];
extern const char feri_chat_template_usage[];
extern const char feri_tiny_model_usage[];
extern const char feri_tokenize_usage[];

/* `ferrite info [--full]`: the build, the CPU, CUDA, and a quick kernel table;
 * `ferrite info MODEL.gguf`: what a model file holds and whether ferrite can run it. */
int feri_cmd_info(int argc, char **argv);

/* `ferrite info MODEL.gguf`, after info has checked that MODEL.gguf is a regular file. */
int feri_cmd_model_info(const char *path);

/* `ferrite generate --model PATH --prompt TEXT ...`: generates text, streaming it. */
int feri_cmd_generate(int argc, char **argv);

/* `ferrite chat-template (--model F.gguf | --template F.jinja) --messages F.json ...`: a
 * conversation rendered by a chat template, byte for byte (chat_template.c). */
int feri_cmd_chat_template(int argc, char **argv);

/* `ferrite tiny-model --arch ARCH [--seed N] --out PATH`: the seeded tiny model as a GGUF file. */
int feri_cmd_tiny_model(int argc, char **argv);

/* `ferrite tokenize --model MODEL.gguf|tokenizer.json (--text TEXT | --file PATH) [--count]`: a text's ids. */
int feri_cmd_tokenize(int argc, char **argv);

#endif
