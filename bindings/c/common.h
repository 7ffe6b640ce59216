/* Helpers shared by the C examples: report a failed call and exit (an application's choice; the library itself
 * never exits or prints). */
#ifndef SPECULA_EXAMPLE_COMMON_H
#define SPECULA_EXAMPLE_COMMON_H

#include <specula/specula.h>

#include <stdio.h>
#include <stdlib.h>

/* Evaluates CALL (a specula_* call whose last argument is &err); on failure prints the status and the message. */
#define CHECK_CALL(CALL)                                                                                 \
    do {                                                                                                 \
        specula_error *err = NULL;                                                                       \
        specula_status st_ = (CALL);                                                                     \
        (void)err;                                                                                       \
        if (st_ != SPECULA_OK) {                                                                         \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #CALL,                     \
                    specula_status_string(st_), err != NULL ? specula_error_message(err) : "");          \
            specula_error_destroy(err);                                                                  \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

/* The model: argv[1], else the bundled one the installed package ships (share/specula/models). */
static const char *example_model_path(int argc, char **argv) {
    return argc > 1 ? argv[1] : SPECULA_EXAMPLE_MODEL;
}

#endif
