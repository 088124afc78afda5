/*
 * The KFD EMULATOR's shared virtual memory: ranges of a process's own memory with KFD's
 * attributes (preferred and prefetch location, per-GPU access, flags, granularity). A
 * queue's packet may name SVM memory its GPU may access; the memory itself stays the
 * process's (no migration is emulated). Ranges never overlap: setting attributes on part
 * of a range splits it, as KFD does. Not a GPU.
 */
#include <errno.h>
#include <stdlib.h>

#include "emu_state.h"

#define SVM_KNOWN_FLAGS 0x7fU
#define SVM_DEFAULT_FLAGS (KFD_IOCTL_SVM_FLAG_HOST_ACCESS | KFD_IOCTL_SVM_FLAG_COHERENT)
#define SVM_DEFAULT_GRANULARITY 9
#define SVM_MAX_GRANULARITY 0x3f

static bool is_access(uint32_t type)
{
	return type == KFD_IOCTL_SVM_ATTR_ACCESS || type == KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE ||
	       type == KFD_IOCTL_SVM_ATTR_NO_ACCESS;
}

static int map_index_of(const struct emu_process *proc, uint32_t user_gpu_id)
{
	for (uint32_t i = 0; i < proc->nr_gpu_maps; i++)
		if (proc->gpu_map[i].user_gpu_id == user_gpu_id)
			return i;
	return -1;
}

static bool location_ok(const struct emu_process *proc, uint32_t type, uint32_t value)
{
	if (value == KFD_IOCTL_SVM_LOCATION_SYSMEM)
		return true;
	if (value == KFD_IOCTL_SVM_LOCATION_UNDEFINED)
		return type == KFD_IOCTL_SVM_ATTR_PREFERRED_LOC;
	return map_index_of(proc, value) >= 0;
}

int emu_svm_check_attrs(struct emu_process *proc, const struct kfd_ioctl_svm_attribute *attrs,
			uint32_t nattr)
{
	for (uint32_t i = 0; i < nattr; i++) {
		uint32_t type = attrs[i].type, value = attrs[i].value;
		bool ok;

		if (type == KFD_IOCTL_SVM_ATTR_PREFERRED_LOC ||
		    type == KFD_IOCTL_SVM_ATTR_PREFETCH_LOC)
			ok = location_ok(proc, type, value);
		else if (is_access(type))
			ok = map_index_of(proc, value) >= 0;
		else if (type == KFD_IOCTL_SVM_ATTR_SET_FLAGS ||
			 type == KFD_IOCTL_SVM_ATTR_CLR_FLAGS)
			ok = !(value & ~SVM_KNOWN_FLAGS);
		else if (type == KFD_IOCTL_SVM_ATTR_GRANULARITY)
			ok = value <= SVM_MAX_GRANULARITY;
		else
			ok = false;
		if (!ok) {
			emu_err("pid %u: SVM attribute %u: type %u value %#x is not valid here",
				proc->pid, i, type, value);
			return -EINVAL;
		}
	}
	return 0;
}

void emu_svm_apply_attrs(struct emu_process *proc, struct emu_svm_range *range,
			 const struct kfd_ioctl_svm_attribute *attrs, uint32_t nattr)
{
	for (uint32_t i = 0; i < nattr; i++) {
		uint32_t value = attrs[i].value;

		switch (attrs[i].type) {
		case KFD_IOCTL_SVM_ATTR_PREFERRED_LOC:
			range->preferred_loc = value;
			break;
		case KFD_IOCTL_SVM_ATTR_PREFETCH_LOC:
			range->prefetch_loc = value;
			break;
		case KFD_IOCTL_SVM_ATTR_SET_FLAGS:
			range->flags |= value;
			break;
		case KFD_IOCTL_SVM_ATTR_CLR_FLAGS:
			range->flags &= ~value;
			break;
		case KFD_IOCTL_SVM_ATTR_GRANULARITY:
			range->granularity = value;
			break;
		default:
			range->access[map_index_of(proc, value)] = attrs[i].type;
			break;
		}
	}
}

static struct emu_svm_range *new_range(uint64_t start, uint64_t size,
				       const struct emu_svm_range *like)
{
	struct emu_svm_range *range = calloc(1, sizeof(*range));

	if (!range)
		return NULL;
	if (like) {
		*range = *like;
	} else {
		range->preferred_loc = KFD_IOCTL_SVM_LOCATION_UNDEFINED;
		range->prefetch_loc = KFD_IOCTL_SVM_LOCATION_SYSMEM;
		range->flags = SVM_DEFAULT_FLAGS;
		range->granularity = SVM_DEFAULT_GRANULARITY;
		for (int i = 0; i < EMU_MAX_GPUS; i++)
			range->access[i] = KFD_IOCTL_SVM_ATTR_NO_ACCESS;
	}
	range->start = start;
	range->size = size;
	range->next = NULL;
	return range;
}

/* Insert keeping the list sorted by start. */
static void insert_range(struct emu_svm_range **list, uint32_t *nr, struct emu_svm_range *range)
{
	struct emu_svm_range **link = list;

	while (*link && (*link)->start < range->start)
		link = &(*link)->next;
	range->next = *link;
	*link = range;
	(*nr)++;
}

/* Split the range at addr if addr falls inside it. */
static int split_at(struct emu_svm_range *range, uint64_t addr, uint32_t *nr)
{
	struct emu_svm_range *tail;

	if (addr <= range->start || addr >= range->start + range->size)
		return 0;
	tail = new_range(addr, range->start + range->size - addr, range);
	if (!tail)
		return -ENOMEM;
	range->size = addr - range->start;
	tail->next = range->next;
	range->next = tail;
	(*nr)++;
	return 0;
}

/* Make [start, end) exactly a run of ranges: split at its ends, fill the gaps. */
static int carve(struct emu_process *proc, uint64_t start, uint64_t end)
{
	uint64_t pos = start;
	int ret = 0;

	for (struct emu_svm_range *r = proc->svm; !ret && r; r = r->next) {
		ret = split_at(r, start, &proc->nr_svm);
		if (!ret)
			ret = split_at(r, end, &proc->nr_svm);
	}
	while (!ret && pos < end) {
		struct emu_svm_range *r, *gap;
		uint64_t gap_end = end;

		for (r = proc->svm; r && r->start + r->size <= pos; r = r->next)
			;
		if (r && r->start <= pos) {
			pos = r->start + r->size;
			continue;
		}
		if (r && r->start < end)
			gap_end = r->start;
		gap = new_range(pos, gap_end - pos, NULL);
		if (!gap)
			return -ENOMEM;
		insert_range(&proc->svm, &proc->nr_svm, gap);
		pos = gap_end;
	}
	return ret;
}

static int svm_set(struct emu_process *proc, const struct kfdemu_svm *req,
		   const struct kfd_ioctl_svm_attribute *attrs)
{
	uint64_t end = req->start + req->size;
	int ret = emu_svm_check_attrs(proc, attrs, req->nattr);

	if (!ret)
		ret = emu_process_range_mapped(proc->pid, req->start, req->size);
	if (!ret)
		ret = carve(proc, req->start, end);
	for (struct emu_svm_range *r = proc->svm; !ret && r; r = r->next)
		if (r->start >= req->start && r->start < end)
			emu_svm_apply_attrs(proc, r, attrs, req->nattr);
	return ret;
}

/* What a range of memory reads as: each attribute uniform over it, or KFD's "mixed". */
static void get_one(struct emu_process *proc, const struct emu_svm_range *r, bool first,
		    struct kfd_ioctl_svm_attribute *attr)
{
	uint32_t value;
	int index;

	switch (attr->type) {
	case KFD_IOCTL_SVM_ATTR_PREFERRED_LOC:
	case KFD_IOCTL_SVM_ATTR_PREFETCH_LOC:
		value = attr->type == KFD_IOCTL_SVM_ATTR_PREFERRED_LOC ? r->preferred_loc :
									 r->prefetch_loc;
		attr->value =
			first || attr->value == value ? value : KFD_IOCTL_SVM_LOCATION_UNDEFINED;
		break;
	case KFD_IOCTL_SVM_ATTR_SET_FLAGS:
		attr->value = first ? r->flags : attr->value & r->flags;
		break;
	case KFD_IOCTL_SVM_ATTR_CLR_FLAGS:
		attr->value = first ? ~r->flags & SVM_KNOWN_FLAGS : attr->value & ~r->flags;
		break;
	case KFD_IOCTL_SVM_ATTR_GRANULARITY:
		attr->value = first || r->granularity < attr->value ? r->granularity : attr->value;
		break;
	default:
		/* The access a GPU has everywhere in the range; anything less is none. */
		index = map_index_of(proc, attr->value);
		if (first)
			attr->type = r->access[index];
		else if (attr->type != r->access[index])
			attr->type = KFD_IOCTL_SVM_ATTR_NO_ACCESS;
		break;
	}
}

static int svm_get(struct emu_process *proc, const struct kfdemu_svm *req,
		   struct kfd_ioctl_svm_attribute *attrs)
{
	uint64_t end = req->start + req->size, covered = req->start;
	bool first = true;
	int ret = emu_svm_check_attrs(proc, attrs, req->nattr);

	for (struct emu_svm_range *r = proc->svm; !ret && r; r = r->next) {
		if (r->start + r->size <= req->start || r->start >= end)
			continue;
		if (r->start > covered)
			break;
		for (uint32_t i = 0; i < req->nattr; i++)
			get_one(proc, r, first, &attrs[i]);
		first = false;
		covered = r->start + r->size;
	}
	if (!ret && covered < end) {
		emu_err("pid %u: SVM %#llx+%#llx: no range covers %#llx", proc->pid,
			(unsigned long long)req->start, (unsigned long long)req->size,
			(unsigned long long)covered);
		ret = -EINVAL;
	}
	return ret;
}

int emu_svm(struct emu_process *proc, const struct kfdemu_svm *req,
	    struct kfd_ioctl_svm_attribute *attrs)
{
	int ret;

	if (!req->size || req->start % EMU_PAGE_SIZE || req->size % EMU_PAGE_SIZE ||
	    req->start + req->size < req->start || req->nattr > KFDEMU_MAX_SVM_ATTRS) {
		emu_err("pid %u: SVM range %#llx+%#llx with %u attributes is not valid",
			emu_process_pid(proc), (unsigned long long)req->start,
			(unsigned long long)req->size, req->nattr);
		return -EINVAL;
	}
	pthread_mutex_lock(&emu_lock);
	ret = emu_check_alive(proc);
	if (!ret && req->op == KFD_IOCTL_SVM_OP_SET_ATTR)
		ret = svm_set(proc, req, attrs);
	else if (!ret && req->op == KFD_IOCTL_SVM_OP_GET_ATTR)
		ret = svm_get(proc, req, attrs);
	else if (!ret)
		ret = -EINVAL;
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

struct emu_svm_range *emu_svm_find(struct emu_process *proc, uint64_t addr, uint64_t len,
				   uint32_t map_index)
{
	uint64_t covered = addr;
	struct emu_svm_range *first = NULL;

	for (struct emu_svm_range *r = proc->svm; r && covered < addr + len; r = r->next) {
		if (r->start + r->size <= covered)
			continue;
		if (r->start > covered || r->access[map_index] == KFD_IOCTL_SVM_ATTR_NO_ACCESS)
			return NULL;
		first = first ? first : r;
		covered = r->start + r->size;
	}
	return covered >= addr + len ? first : NULL;
}

/* RESUME: the restored process's memory is back; its ranges must be mapped again. */
int emu_svm_resume(struct emu_process *proc)
{
	for (struct emu_svm_range *r = proc->svm_pending; r; r = r->next) {
		int ret = emu_process_range_mapped(proc->pid, r->start, r->size);

		if (ret) {
			emu_err("pid %u: RESUME: SVM range %#llx+%#llx is not mapped in the "
				"restored process",
				proc->pid, (unsigned long long)r->start,
				(unsigned long long)r->size);
			return ret;
		}
	}
	while (proc->svm_pending) {
		struct emu_svm_range *r = proc->svm_pending;

		proc->svm_pending = r->next;
		proc->nr_svm_pending--;
		insert_range(&proc->svm, &proc->nr_svm, r);
	}
	return 0;
}

void emu_svm_free_list(struct emu_svm_range **list, uint32_t *nr)
{
	while (*list) {
		struct emu_svm_range *r = *list;

		*list = r->next;
		free(r);
	}
	*nr = 0;
}
