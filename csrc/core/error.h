/* core/error.h -- errors are values: a bs_status plus a bs_error context (house style G7).
** The context names the place with program indices; the message text already holds the
** names, so a C caller needs nothing else. The binding turns indices into attributes. */
#ifndef BS_CORE_ERROR_H
#define BS_CORE_ERROR_H

#include "common.h"

#define BS_ERRMSG 4096

typedef struct bs_error {
    bs_status status;
    int32_t   core;          /* core index, -1 if none */
    int32_t   func;          /* function index, -1 if none */
    int32_t   block;         /* block index, -1 if none */
    int32_t   insn;          /* instruction index, -1 if none */
    int32_t   operand;       /* 0.. for ins[k], BS_OUT_OPERAND+k for outs[k], -1 if none */
    int64_t   code;          /* compiler error code where the spec gives one (1910, 250) */
    char      msg[BS_ERRMSG];/* always NUL-terminated */
} bs_error;

void bs_error_clear(bs_error *err);

/* Format the message (printf style) and set err->status. Returns `st`, so callers write
** `return bs_errorf(err, BS_E_OOB, "...")`. Location fields are left as they are. */
bs_status bs_errorf(bs_error *err, bs_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Append to err->msg (truncating safely). */
void bs_error_append(bs_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

const char *bs_status_name(bs_status st);
const char *bs_status_message(bs_status st);

#endif
