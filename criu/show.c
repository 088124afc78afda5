/*
 * criu show: decode one image file and print it as JSON on stdout. Protobuf records are
 * walked generically through their protobuf-c descriptors; raw page images and ghost file
 * contents are summarised by size. Nothing is printed unless the whole file decodes.
 *
 * Output: {"magic": "CORE", "version": 1, "entries": [ {...}, ... ]}. Enums print by name,
 * bytes as a hex string, 64-bit integers as JSON numbers, except the address-like fields of
 * hex_fields[] below, which print as "0x..." strings (as CRIU's crit prints them); int(v, 0)
 * in Python reads either form. Absent optional fields and empty repeated fields are omitted.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdinfo.pb-c.h"
#include "pagemap.pb-c.h"
#include "image.h"
#include "log.h"

/* The on-disk file header every image starts with (see image.h). */
struct img_file_header {
	uint32_t common_magic;
	uint32_t type_magic;
	uint32_t version;
};

/* One image file being decoded: where it is read from, where the JSON goes. */
struct show_ctx {
	const char *path;
	int fd;
	off_t size; /* bytes in the file */
	off_t pos; /* bytes consumed so far */
	FILE *out; /* memory stream: flushed to stdout only on success */
};

/* Address-like fields, printed as hex strings: a reader compares them with /proc/PID/maps. */
static const char *const hex_fields[] = {
	"start", "end", "vaddr", "handler", "restorer", "rseq_abi_pointer", "ss_sp",
	"clear_tid_addr", "robust_list", "sival_ptr", "ip", "sp", "fs_base", "gs_base",
	"mm_start_code", "mm_end_code", "mm_start_data", "mm_end_data", "mm_start_stack",
	"mm_start_brk", "mm_brk", "mm_arg_start", "mm_arg_end", "mm_env_start", "mm_env_end",
};

static bool is_hex_field(const char *name)
{
	for (size_t i = 0; i < sizeof(hex_fields) / sizeof(hex_fields[0]); i++)
		if (!strcmp(name, hex_fields[i]))
			return true;
	return false;
}

static void json_indent(FILE *out, int depth)
{
	fprintf(out, "%*s", depth * 4, "");
}

/*
 * Length of the valid UTF-8 sequence at p, or 0 if it is not one. Overlong forms and
 * surrogates are rejected so that any JSON parser accepts what we print.
 */
static size_t utf8_seq_len(const unsigned char *p, size_t left)
{
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (len > left)
		return 0;
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

/*
 * Paths in images are raw bytes, not necessarily UTF-8. A byte that does not start a
 * valid sequence prints as \u00XX: the JSON stays valid, at the price of being lossy
 * for such names.
 */
static void json_string(FILE *out, const char *str)
{
	const unsigned char *p = (const unsigned char *)str;
	size_t left = strlen(str);

	fputc('"', out);
	while (left) {
		size_t seq;

		if (*p == '"' || *p == '\\') {
			fprintf(out, "\\%c", *p);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(out, "\\u%04x", *p);
		} else if (*p < 0x80) {
			fputc(*p, out);
		} else if ((seq = utf8_seq_len(p, left))) {
			fwrite(p, 1, seq, out);
			p += seq - 1;
			left -= seq - 1;
		} else {
			fprintf(out, "\\u%04x", *p);
		}
		p++;
		left--;
	}
	fputc('"', out);
}

static void json_hex_bytes(FILE *out, const ProtobufCBinaryData *data)
{
	fputc('"', out);
	for (size_t i = 0; i < data->len; i++)
		fprintf(out, "%02x", data->data[i]);
	fputc('"', out);
}

static size_t field_elem_size(ProtobufCType type)
{
	switch (type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return sizeof(uint64_t);
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	default: /* 32-bit integers, enums and floats */
		return sizeof(uint32_t);
	}
}

static void json_enum(FILE *out, const ProtobufCEnumDescriptor *desc, int value)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(desc, value);

	/* A value this build does not know is still worth showing. */
	if (ev)
		json_string(out, ev->name);
	else
		fprintf(out, "%d", value);
}

/* Non-finite doubles have no JSON spelling: print them as strings. */
static void json_double(FILE *out, double value)
{
	if (value != value || value - value != 0)
		fprintf(out, "\"%g\"", value);
	else
		fprintf(out, "%.17g", value);
}

static void json_message(FILE *out, const ProtobufCMessage *msg, int depth);

/* One value of a field (one element of a repeated field) at value_ptr. */
static void json_value(FILE *out, const ProtobufCFieldDescriptor *field, const void *value_ptr,
		       int depth)
{
	switch (field->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		fprintf(out, "%" PRId32, *(const int32_t *)value_ptr);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		fprintf(out, "%" PRIu32, *(const uint32_t *)value_ptr);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		fprintf(out, "%" PRId64, *(const int64_t *)value_ptr);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		if (is_hex_field(field->name))
			fprintf(out, "\"0x%" PRIx64 "\"", *(const uint64_t *)value_ptr);
		else
			fprintf(out, "%" PRIu64, *(const uint64_t *)value_ptr);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		json_double(out, *(const float *)value_ptr);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		json_double(out, *(const double *)value_ptr);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		fputs(*(const protobuf_c_boolean *)value_ptr ? "true" : "false", out);
		break;
	case PROTOBUF_C_TYPE_ENUM:
		json_enum(out, field->descriptor, *(const int *)value_ptr);
		break;
	case PROTOBUF_C_TYPE_STRING:
		json_string(out, *(char *const *)value_ptr);
		break;
	case PROTOBUF_C_TYPE_BYTES:
		json_hex_bytes(out, value_ptr);
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		json_message(out, *(ProtobufCMessage *const *)value_ptr, depth);
		break;
	}
}

/* Whether a non-repeated field holds a value worth printing. */
static bool field_is_set(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *field)
{
	const char *base = (const char *)msg;

	if (field->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)(base + field->quantifier_offset) == field->id;
	if (field->label != PROTOBUF_C_LABEL_OPTIONAL)
		return true;
	/* protobuf-c marks absent optional strings and messages by a NULL pointer, not a flag. */
	if (field->type == PROTOBUF_C_TYPE_STRING || field->type == PROTOBUF_C_TYPE_MESSAGE)
		return *(void *const *)(base + field->offset) != NULL;
	return *(const protobuf_c_boolean *)(base + field->quantifier_offset);
}

/* Repeated scalars fit on one line; repeated messages get one element per line. */
static void json_repeated(FILE *out, const ProtobufCMessage *msg,
			  const ProtobufCFieldDescriptor *field, int depth)
{
	const char *base = (const char *)msg;
	size_t count = *(const size_t *)(base + field->quantifier_offset);
	const char *elems = *(char *const *)(base + field->offset);
	size_t elem_size = field_elem_size(field->type);
	bool multiline = field->type == PROTOBUF_C_TYPE_MESSAGE;

	fputc('[', out);
	for (size_t i = 0; i < count; i++) {
		if (i)
			fputs(multiline ? "," : ", ", out);
		if (multiline) {
			fputc('\n', out);
			json_indent(out, depth + 1);
		}
		json_value(out, field, elems + i * elem_size, depth + 1);
	}
	if (multiline) {
		fputc('\n', out);
		json_indent(out, depth);
	}
	fputc(']', out);
}

static void json_message(FILE *out, const ProtobufCMessage *msg, int depth)
{
	const ProtobufCMessageDescriptor *desc = msg->descriptor;
	bool first = true;

	fputc('{', out);
	for (unsigned int i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *field = &desc->fields[i];
		bool repeated = field->label == PROTOBUF_C_LABEL_REPEATED;

		if (repeated ? !*(const size_t *)((const char *)msg + field->quantifier_offset)
			     : !field_is_set(msg, field))
			continue;
		fputs(first ? "\n" : ",\n", out);
		first = false;
		json_indent(out, depth + 1);
		fprintf(out, "\"%s\": ", field->name);
		if (repeated)
			json_repeated(out, msg, field, depth + 1);
		else
			json_value(out, field, (const char *)msg + field->offset, depth + 1);
	}
	if (!first) {
		fputc('\n', out);
		json_indent(out, depth);
	}
	fputc('}', out);
}

/* Read up to len bytes; returns how many were read (short only at end of file) or -errno. */
static ssize_t show_read(struct show_ctx *ctx, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(ctx->fd, (char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;

			pr_perror("%s: read failed at offset %lld", ctx->path,
				  (long long)(ctx->pos + done));
			return -err;
		}
		if (n == 0)
			break;
		done += n;
	}
	ctx->pos += done;
	return done;
}

/*
 * Read and unpack the next record. Returns 1 with *msg set, 0 at a clean end of file,
 * -errno (logged) on a truncated or corrupt record.
 */
static int show_read_record(struct show_ctx *ctx, const ProtobufCMessageDescriptor *desc,
			    ProtobufCMessage **msg)
{
	off_t rec_pos = ctx->pos;
	uint32_t rec_len;
	uint8_t *buf;
	ssize_t n;

	n = show_read(ctx, &rec_len, sizeof(rec_len));
	if (n <= 0)
		return n;
	if (n != sizeof(rec_len) || rec_len > ctx->size - ctx->pos) {
		pr_err("%s: truncated record at offset %lld\n", ctx->path, (long long)rec_pos);
		return -EIO;
	}
	buf = malloc(rec_len ? rec_len : 1);
	if (!buf) {
		pr_err("%s: no memory for a %u-byte record\n", ctx->path, rec_len);
		return -ENOMEM;
	}
	n = show_read(ctx, buf, rec_len);
	if (n >= 0 && n != rec_len) {
		pr_err("%s: truncated record at offset %lld\n", ctx->path, (long long)rec_pos);
		n = -EIO;
	}
	if (n >= 0) {
		*msg = protobuf_c_message_unpack(desc, NULL, rec_len, buf);
		if (!*msg) {
			pr_err("%s: corrupt %s record at offset %lld\n", ctx->path, desc->name,
			       (long long)rec_pos);
			n = -EIO;
		}
	}
	free(buf);
	return n < 0 ? n : 1;
}

/*
 * Print every record of a protobuf image: the first one of type first_desc (a head record,
 * as pagemap images have), the others of type desc.
 */
static int show_records(struct show_ctx *ctx, const ProtobufCMessageDescriptor *first_desc,
			const ProtobufCMessageDescriptor *desc)
{
	int nr_records = 0;

	fputs(",\n    \"entries\": [", ctx->out);
	for (;;) {
		ProtobufCMessage *msg;
		int ret = show_read_record(ctx, nr_records ? desc : first_desc, &msg);

		if (ret < 0)
			return ret;
		if (ret == 0)
			break;
		fputs(nr_records ? ",\n" : "\n", ctx->out);
		json_indent(ctx->out, 2);
		json_message(ctx->out, msg, 2);
		protobuf_c_message_free_unpacked(msg, NULL);
		nr_records++;
	}
	fputs(nr_records ? "\n    ]" : "]", ctx->out);
	return 0;
}

/* pages-ID.img: the header page, then page data; only the sizes are shown. */
static int show_pages(struct show_ctx *ctx)
{
	long page_size = sysconf(_SC_PAGESIZE);
	off_t data_size = ctx->size - PAGES_IMG_HDR_SIZE;

	if (ctx->size < PAGES_IMG_HDR_SIZE) {
		pr_err("%s: truncated header page (%lld of %u bytes)\n", ctx->path,
		       (long long)ctx->size, PAGES_IMG_HDR_SIZE);
		return -EIO;
	}
	if (data_size % page_size) {
		pr_err("%s: %lld bytes of page data is not a whole number of pages\n", ctx->path,
		       (long long)data_size);
		return -EIO;
	}
	fprintf(ctx->out, ",\n    \"size\": %lld,\n    \"nr_pages\": %lld", (long long)data_size,
		(long long)(data_size / page_size));
	return 0;
}

/* ghost-file-ID.img: one ghost_file_entry, then exactly entry->size bytes of contents. */
static int show_ghost_file(struct show_ctx *ctx)
{
	ProtobufCMessage *msg;
	uint64_t contents_size, declared_size;
	int ret;

	fputs(",\n    \"entries\": [\n", ctx->out);
	ret = show_read_record(ctx, &ghost_file_entry__descriptor, &msg);
	if (ret == 0) {
		pr_err("%s: missing ghost file header record\n", ctx->path);
		return -EIO;
	}
	if (ret < 0)
		return ret;
	json_indent(ctx->out, 2);
	json_message(ctx->out, msg, 2);
	declared_size = ((GhostFileEntry *)msg)->size;
	protobuf_c_message_free_unpacked(msg, NULL);

	contents_size = ctx->size - ctx->pos;
	if (contents_size != declared_size) {
		pr_err("%s: %" PRIu64 " bytes of contents, header says %" PRIu64 "\n", ctx->path,
		       contents_size, declared_size);
		return -EIO;
	}
	fprintf(ctx->out, "\n    ],\n    \"contents_size\": %" PRIu64, contents_size);
	return 0;
}

/* Check the header and find which image this is: its index in cr_img_descs[] or -errno. */
static int show_header(struct show_ctx *ctx)
{
	struct img_file_header hdr;
	ssize_t n = show_read(ctx, &hdr, sizeof(hdr));

	if (n < 0)
		return n;
	if (n != sizeof(hdr)) {
		pr_err("%s: truncated image header (%zd of %zu bytes)\n", ctx->path, n,
		       sizeof(hdr));
		return -EIO;
	}
	if (hdr.common_magic != IMG_COMMON_MAGIC) {
		pr_err("%s: not an image file (magic %#x, expected %#x)\n", ctx->path,
		       hdr.common_magic, IMG_COMMON_MAGIC);
		return -EINVAL;
	}
	if (hdr.version != IMG_FORMAT_VERSION) {
		pr_err("%s: image format version %u, this criu reads version %u\n", ctx->path,
		       hdr.version, IMG_FORMAT_VERSION);
		return -EINVAL;
	}
	for (int type = 0; type < CR_IMG_MAX; type++)
		if (cr_img_descs[type].magic == hdr.type_magic)
			return type;
	pr_err("%s: unknown image type magic %#x\n", ctx->path, hdr.type_magic);
	return -EINVAL;
}

/* Decode the body of an image of the given type after its header. */
static int show_body(struct show_ctx *ctx, enum cr_img_type type)
{
	if (type == CR_IMG_PAGES)
		return show_pages(ctx);
	if (type == CR_IMG_GHOST_FILE)
		return show_ghost_file(ctx);
	/* pagemap-PID.img starts with a pagemap_head naming its pages image. */
	if (type == CR_IMG_PAGEMAP)
		return show_records(ctx, &pagemap_head__descriptor, cr_img_descs[type].pb_desc);
	return show_records(ctx, cr_img_descs[type].pb_desc, cr_img_descs[type].pb_desc);
}

static int show_file(struct show_ctx *ctx)
{
	struct stat st;
	int type, ret;

	if (fstat(ctx->fd, &st)) {
		int err = errno;

		pr_perror("%s: cannot stat", ctx->path);
		return -err;
	}
	if (!S_ISREG(st.st_mode)) {
		pr_err("%s: not a regular file\n", ctx->path);
		return -EINVAL;
	}
	ctx->size = st.st_size;

	type = show_header(ctx);
	if (type < 0)
		return type;
	fprintf(ctx->out, "{\n    \"magic\": \"%s\",\n    \"version\": %u", cr_img_descs[type].name,
		IMG_FORMAT_VERSION);
	ret = show_body(ctx, type);
	if (ret)
		return ret;
	fputs("\n}\n", ctx->out);
	return 0;
}

int cr_show(const char *path)
{
	struct show_ctx ctx = { .path = path };
	char *json = NULL;
	size_t json_len = 0;
	int ret;

	ctx.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (ctx.fd < 0) {
		int err = errno;

		pr_perror("cannot open image %s", path);
		return -err;
	}
	ctx.out = open_memstream(&json, &json_len);
	if (!ctx.out) {
		pr_perror("cannot allocate the output buffer");
		close(ctx.fd);
		return -ENOMEM;
	}
	ret = show_file(&ctx);
	close(ctx.fd);
	if (fclose(ctx.out) && !ret) {
		pr_perror("%s: cannot build the output", path);
		ret = -ENOMEM;
	}
	if (!ret && (fwrite(json, 1, json_len, stdout) != json_len || fflush(stdout))) {
		pr_perror("cannot write to stdout");
		ret = -EIO;
	}
	free(json);
	return ret;
}
