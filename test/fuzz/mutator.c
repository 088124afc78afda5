/*
 * A protobuf-aware libFuzzer mutator for the image targets: half of the time it decodes one
 * record of one image of the input, changes one field (or drops or repeats the record) and
 * encodes it again, so inputs stay valid protobuf that gets past decoding to the readers.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "image.h"

#include "pagemap.pb-c.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define MAX_CHOICES 256 /* files of an input, records of a file: the first ones are picked from */
#define MAX_DEPTH 8
#define LONG_STRING_LEN 5000 /* longer than PATH_MAX */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static unsigned int below(unsigned int n)
{
	return rnd() % n;
}

/* One image file inside the input: its type and where its bytes are. */
struct input_file {
	enum cr_img_type type;
	size_t off, len;
};

/* The packed file whose mark is at mark; false if its name is no image's. */
static bool packed_file(const uint8_t *data, size_t size, const uint8_t *mark, struct input_file *f)
{
	const uint8_t *end = data + size, *header = mark + FUZZ_FILE_MARK_LEN;
	const uint8_t *header_end = memchr(header, '\0', end - header), *next;
	unsigned long id;

	if (!header_end || !fuzz_image_type((const char *)header, &f->type, &id))
		return false;
	next = memmem(header_end + 1, end - header_end - 1, FUZZ_FILE_MARK, FUZZ_FILE_MARK_LEN);
	f->off = header_end + 1 - data;
	f->len = (next ? next : end) - (header_end + 1);
	return true;
}

/* A random image file of the input; false if it holds none. */
static bool pick_file(const uint8_t *data, size_t size, struct input_file *f)
{
	const uint8_t *marks[MAX_CHOICES], *p = memmem(data, size, FUZZ_FILE_MARK, FUZZ_FILE_MARK_LEN);
	unsigned int nr = 0;

	while (p && nr < MAX_CHOICES) {
		marks[nr++] = p;
		p = memmem(p + 1, data + size - p - 1, FUZZ_FILE_MARK, FUZZ_FILE_MARK_LEN);
	}
	return nr && packed_file(data, size, marks[below(nr)], f);
}

static uint64_t interesting_value(void)
{
	static const uint64_t values[] = {
		0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 63, 64, 65, 127, 128, 255, 256, 1023, 1024,
		4095, 4096, 4097, 65535, 65536, 0x7fffffff, 0x80000000, 0xffffffff, 0x100000000,
		0x7ffffffff000, 0x7fffffffffff, 0x800000000000, 0xffffffffff600000,
		0x7fffffffffffffff, 0x8000000000000000, 0xfffffffffffff000, UINT64_MAX,
	};
	uint64_t v = values[below(sizeof(values) / sizeof(values[0]))];

	return below(4) ? v : -v;
}

static uint64_t mutate_number(uint64_t v)
{
	switch (below(5)) {
	case 0:
		return interesting_value();
	case 1:
		return v + below(33) - 16;
	case 2:
		return v ^ (1ull << below(64));
	case 3:
		return rnd();
	default:
		return v * 2 + below(2);
	}
}

/* A scalar of field fd at p: numbers, bools and enums (any value: readers must check it). */
static void mutate_scalar(const ProtobufCFieldDescriptor *fd, void *p)
{
	switch (fd->type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		*(uint64_t *)p = mutate_number(*(uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)p = !*(protobuf_c_boolean *)p;
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumDescriptor *ed = fd->descriptor;

		if (ed->n_values && below(2))
			*(int32_t *)p = ed->values[below(ed->n_values)].value;
		else
			*(uint32_t *)p = mutate_number(*(uint32_t *)p);
		break;
	}
	default: /* the 32-bit numbers and float */
		*(uint32_t *)p = mutate_number(*(uint32_t *)p);
		break;
	}
}

/* A new string for *p (the old one freed unless it is the field's default). */
static void mutate_string(const ProtobufCFieldDescriptor *fd, char **p)
{
	static const char *const strings[] = { "", "/", ".", "..", "/..", "../../etc/passwd",
					       "/proc/self/mem", "/dev/null", "a\nb", "%s%n" };
	size_t old_len = *p ? strlen(*p) : 0;
	size_t cap = old_len + 64 > LONG_STRING_LEN ? old_len + 64 : LONG_STRING_LEN;
	char *s = malloc(cap + 1);

	if (!s)
		return;
	switch (below(3)) {
	case 0:
		strcpy(s, strings[below(sizeof(strings) / sizeof(strings[0]))]);
		break;
	case 1:
		memset(s, 'A', LONG_STRING_LEN);
		s[LONG_STRING_LEN] = '\0';
		break;
	default:
		memcpy(s, *p ? *p : "", old_len);
		s[LLVMFuzzerMutate((uint8_t *)s, old_len, cap)] = '\0';
		break;
	}
	if (*p != fd->default_value)
		free(*p);
	*p = s;
}

static void mutate_bytes(const ProtobufCFieldDescriptor *fd, ProtobufCBinaryData *b)
{
	const ProtobufCBinaryData *dflt = fd->default_value;
	size_t cap = b->len * 2 + 64;
	uint8_t *data = malloc(cap);

	if (!data)
		return;
	if (b->len)
		memcpy(data, b->data, b->len);
	b->len = LLVMFuzzerMutate(data, b->len, cap);
	if (!dflt || b->data != dflt->data)
		free(b->data);
	b->data = data;
}

static void mutate_message(ProtobufCMessage *msg, int depth);

/* One value of field fd at p (an element of a repeated field, or the field itself). */
static void mutate_value(const ProtobufCFieldDescriptor *fd, void *p, int depth)
{
	switch (fd->type) {
	case PROTOBUF_C_TYPE_MESSAGE:
		if (*(ProtobufCMessage **)p)
			mutate_message(*(ProtobufCMessage **)p, depth + 1);
		break;
	case PROTOBUF_C_TYPE_STRING:
		mutate_string(fd, p);
		break;
	case PROTOBUF_C_TYPE_BYTES:
		mutate_bytes(fd, p);
		break;
	default:
		mutate_scalar(fd, p);
		break;
	}
}

static size_t value_size(const ProtobufCFieldDescriptor *fd)
{
	switch (fd->type) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

static bool is_scalar(const ProtobufCFieldDescriptor *fd)
{
	return fd->type != PROTOBUF_C_TYPE_STRING && fd->type != PROTOBUF_C_TYPE_BYTES &&
	       fd->type != PROTOBUF_C_TYPE_MESSAGE;
}

/* Optional scalars and bytes say whether they are there in a has_ field; the rest by NULL. */
static bool has_quantifier(const ProtobufCFieldDescriptor *fd)
{
	return fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->type != PROTOBUF_C_TYPE_STRING &&
	       fd->type != PROTOBUF_C_TYPE_MESSAGE;
}

/* A repeated field: change an element, or drop the last one (scalars: nothing to free). */
static void mutate_repeated(const ProtobufCFieldDescriptor *fd, char *base, int depth)
{
	size_t *n = (size_t *)(base + fd->quantifier_offset);
	char *elems = *(char **)(base + fd->offset);

	if (!*n)
		return;
	if (is_scalar(fd) && !below(8))
		(*n)--;
	else
		mutate_value(fd, elems + below(*n) * value_size(fd), depth);
}

/* One random field of msg (or of a message inside it). */
static void mutate_message(ProtobufCMessage *msg, int depth)
{
	const ProtobufCMessageDescriptor *desc = msg->descriptor;
	const ProtobufCFieldDescriptor *fd;
	char *base = (char *)msg;

	if (!desc->n_fields || depth > MAX_DEPTH)
		return;
	fd = &desc->fields[below(desc->n_fields)];
	if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
		mutate_repeated(fd, base, depth);
	} else if (has_quantifier(fd)) {
		protobuf_c_boolean *has = (protobuf_c_boolean *)(base + fd->quantifier_offset);

		if (*has && !below(4)) {
			*has = 0;
		} else {
			*has = 1;
			mutate_value(fd, base + fd->offset, depth);
		}
	} else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->type == PROTOBUF_C_TYPE_MESSAGE &&
		   *(ProtobufCMessage **)(base + fd->offset) && !below(8)) {
		protobuf_c_message_free_unpacked(*(ProtobufCMessage **)(base + fd->offset), NULL);
		*(ProtobufCMessage **)(base + fd->offset) = NULL;
	} else {
		mutate_value(fd, base + fd->offset, depth);
	}
}

/* A record of f: where its u32 length is, and how long it is with that length. */
struct record {
	size_t off, len;
};

static const ProtobufCMessageDescriptor *record_desc(enum cr_img_type type, unsigned int idx)
{
	if ((type == CR_IMG_PAGEMAP || type == CR_IMG_SHMEM_PAGEMAP) && idx == 0)
		return &pagemap_head__descriptor;
	return cr_img_descs[type].pb_desc;
}

/*
 * The records of f that decode, from the start, up to the first that does not: raw bytes
 * after a record (pipe data, ghost contents) end the walk.
 */
static unsigned int find_records(const uint8_t *data, const struct input_file *f, struct record *recs)
{
	const struct cr_img_desc *d = &cr_img_descs[f->type];
	size_t pos = f->off + 4 * (!!d->first_magic + !!d->magic), end = f->off + f->len;
	unsigned int nr = 0;

	while (nr < MAX_CHOICES && pos + 4 <= end) {
		uint32_t len;
		ProtobufCMessage *msg;

		memcpy(&len, data + pos, 4);
		if (len > end - pos - 4)
			break;
		msg = protobuf_c_message_unpack(record_desc(f->type, nr), NULL, len, data + pos + 4);
		if (!msg)
			break;
		protobuf_c_message_free_unpacked(msg, NULL);
		recs[nr++] = (struct record){ pos, 4 + len };
		pos += 4 + len;
	}
	return nr;
}

/* Put len bytes of rec over [at, at + old_len) of data; the new size, or 0 if too big. */
static size_t splice(uint8_t *data, size_t size, size_t max_size, size_t at, size_t old_len,
		     const uint8_t *rec, size_t len)
{
	if (size - old_len + len > max_size)
		return 0;
	memmove(data + at + len, data + at + old_len, size - at - old_len);
	if (len)
		memcpy(data + at, rec, len);
	return size - old_len + len;
}

/* Change one record of f: a field of it, or drop or repeat it. The new size, or 0. */
static size_t mutate_record(uint8_t *data, size_t size, size_t max_size, const struct input_file *f)
{
	static struct record recs[MAX_CHOICES];
	unsigned int nr = find_records(data, f, recs), idx;
	const ProtobufCMessageDescriptor *desc;
	ProtobufCMessage *msg;
	uint8_t *packed;
	size_t len, ret;
	uint32_t len32;

	if (!nr)
		return 0;
	idx = below(nr);
	switch (below(8)) {
	case 0:
		return splice(data, size, max_size, recs[idx].off, recs[idx].len, NULL, 0);
	case 1:
		packed = malloc(recs[idx].len);
		if (!packed)
			return 0;
		memcpy(packed, data + recs[idx].off, recs[idx].len);
		ret = splice(data, size, max_size, recs[idx].off, 0, packed, recs[idx].len);
		free(packed);
		return ret;
	}
	desc = record_desc(f->type, idx);
	msg = protobuf_c_message_unpack(desc, NULL, recs[idx].len - 4, data + recs[idx].off + 4);
	if (!msg)
		return 0;
	mutate_message(msg, 0);
	len = protobuf_c_message_get_packed_size(msg);
	packed = malloc(4 + len);
	ret = 0;
	if (packed && len <= UINT32_MAX) {
		len32 = len;
		memcpy(packed, &len32, 4);
		protobuf_c_message_pack(msg, packed + 4);
		ret = splice(data, size, max_size, recs[idx].off, recs[idx].len, packed, 4 + len);
	}
	free(packed);
	protobuf_c_message_free_unpacked(msg, NULL);
	return ret;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	struct input_file f;
	size_t ret = 0;

	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	if (below(2) && pick_file(data, size, &f) && cr_img_descs[f.type].pb_desc)
		ret = mutate_record(data, size, max_size, &f);
	return ret ? ret : LLVMFuzzerMutate(data, size, max_size);
}
