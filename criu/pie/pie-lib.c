/*
 * Freestanding helpers for the restorer blob: memcpy/memset (the compiler emits calls to
 * them for struct copies) and a small printf for log lines. No libc, no globals; runs
 * inside the task being restored.
 */
#include "pie-lib.h"
#include "syscalls.h"

void *memcpy(void *dst, const void *src, size_t len)
{
	unsigned char *to = dst;
	const unsigned char *from = src;

	while (len--)
		*to++ = *from++;
	return dst;
}

void *memset(void *dst, int byte, size_t len)
{
	unsigned char *to = dst;

	while (len--)
		*to++ = (unsigned char)byte;
	return dst;
}

struct log_buf {
	char *pos;
	char *end;
};

static void put_char(struct log_buf *buf, char c)
{
	if (buf->pos < buf->end)
		*buf->pos++ = c;
}

static void put_str(struct log_buf *buf, const char *str)
{
	if (!str)
		str = "(null)";
	while (*str)
		put_char(buf, *str++);
}

static void put_unsigned(struct log_buf *buf, uint64_t val, unsigned int base)
{
	char digits[24];
	int nr = 0;

	do {
		digits[nr++] = "0123456789abcdef"[val % base];
		val /= base;
	} while (val);
	while (nr)
		put_char(buf, digits[--nr]);
}

static void put_signed(struct log_buf *buf, int64_t val)
{
	if (val < 0) {
		put_char(buf, '-');
		put_unsigned(buf, -(uint64_t)val, 10);
	} else {
		put_unsigned(buf, val, 10);
	}
}

/* One conversion after '%'; returns the format position after it. */
static const char *put_conversion(struct log_buf *buf, const char *fmt, va_list *args)
{
	int is_long = 0;

	if (*fmt == 'l') {
		is_long = 1;
		fmt++;
	}
	switch (*fmt) {
	case 'd':
		put_signed(buf, is_long ? va_arg(*args, int64_t) : va_arg(*args, int));
		break;
	case 'u':
		put_unsigned(buf, is_long ? va_arg(*args, uint64_t) : va_arg(*args, unsigned int), 10);
		break;
	case 'x':
		put_unsigned(buf, is_long ? va_arg(*args, uint64_t) : va_arg(*args, unsigned int), 16);
		break;
	case 's':
		put_str(buf, va_arg(*args, const char *));
		break;
	case '%':
		put_char(buf, '%');
		break;
	default:
		put_char(buf, '?');
		return *fmt ? fmt + 1 : fmt;
	}
	return fmt + 1;
}

void rst_log(int log_fd, int loglevel, int pid, int level, const char *fmt, ...)
{
	char line[512];
	struct log_buf buf = { line, line + sizeof(line) - 1 };
	va_list args;

	if (log_fd < 0 || level > loglevel)
		return;
	put_str(&buf, "(restorer) ");
	put_signed(&buf, pid);
	put_str(&buf, level == RST_LOG_ERROR ? ": Error: " : level == RST_LOG_WARN ? ": Warn: " : ": ");
	va_start(args, fmt);
	while (*fmt) {
		if (*fmt == '%')
			fmt = put_conversion(&buf, fmt + 1, &args);
		else
			put_char(&buf, *fmt++);
	}
	va_end(args);
	if (buf.pos[-1] != '\n')
		*buf.pos++ = '\n';
	/* A lost log line has nowhere to be reported. */
	sys_write(log_fd, line, buf.pos - line);
}
