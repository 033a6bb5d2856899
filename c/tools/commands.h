/* commands.h: the subcommands of the `ferrite` program. */
#ifndef FERI_TOOLS_COMMANDS_H
#define FERI_TOOLS_COMMANDS_H

/* `ferrite info [--full]`: the build, the CPU, CUDA, and a quick kernel table. */
int feri_cmd_info(int argc, char **argv);

/* `ferrite info MODEL.gguf`: what a model file holds and whether ferrite can run it. */
int feri_cmd_model_info(const char *path);

/* `ferrite generate --model PATH --prompt TEXT ...`: generates text, streaming it. */
int feri_cmd_generate(int argc, char **argv);

/* `ferrite tiny-model --arch ARCH [--seed N] --out PATH`: the seeded tiny model as a GGUF file. */
int feri_cmd_tiny_model(int argc, char **argv);

/* `ferrite tokenize --model PATH (--text TEXT | --file PATH) [--count]`: a text's ids. */
int feri_cmd_tokenize(int argc, char **argv);

#endif
