/* core/error.c -- bs_error formatting and status names generated from bs_status.def. */
#include <stdarg.h>
#include <stdio.h>
#include "error.h"

static const char *const status_names[BS_ST__COUNT] = {
#define BS_ST(name, exc, msg) [BS_##name] = #name,
#include "../bs_status.def"
#undef BS_ST
};

static const char *const status_msgs[BS_ST__COUNT] = {
#define BS_ST(name, exc, msg) [BS_##name] = msg,
#include "../bs_status.def"
#undef BS_ST
};

void bs_error_clear(bs_error *err)
{
    err->status = BS_OK;
    err->core = err->func = err->block = err->insn = err->operand = -1;
    err->code = 0;
    err->msg[0] = '\0';
}

bs_status bs_errorf(bs_error *err, bs_status st, const char *fmt, ...)
{
    va_list ap;
    err->status = st;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return st;
}

void bs_error_append(bs_error *err, const char *fmt, ...)
{
    size_t n = strlen(err->msg);
    va_list ap;
    if (n + 1 >= sizeof err->msg)
        return;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - n, fmt, ap);
    va_end(ap);
}

const char *bs_status_name(bs_status st)
{
    return (unsigned)st < BS_ST__COUNT ? status_names[st] : "E_UNKNOWN";
}

const char *bs_status_message(bs_status st)
{
    return (unsigned)st < BS_ST__COUNT ? status_msgs[st] : "unknown status";
}
