/*
 * The KFD EMULATOR's CRIU ops (AMDKFD_IOC_CRIU_OP): PROCESS_INFO, CHECKPOINT, UNPAUSE,
 * RESTORE, RESUME, with the buckets of <linux/kfd_ioctl.h> and private data laid out as
 * KFD lays out its own: the process, one entry per device, one per BO, then the objects
 * (queues with their MQD and control stack, events, SVM ranges with their attributes).
 * As strict as KFD where it can be: a render node per device, the same number of GPUs,
 * valid ids, buffers inside restored BOs, private data consumed exactly. Not a GPU.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu_state.h"

/* KFD_CRIU_PRIV_VERSION: private data of another version is refused. */
#define EMU_CRIU_PRIV_VERSION 1

enum { OBJ_QUEUE, OBJ_EVENT, OBJ_SVM_RANGE };

/* The private data's parts, laid out as KFD's (kfd_priv.h). */
struct priv_process {
	uint32_t version;
	uint32_t xnack_mode;
};

struct priv_device {
	uint64_t reserved;
};

struct priv_bo {
	uint64_t user_addr;
	uint32_t idr_handle;
	uint32_t mapped_gpuids[EMU_MAX_GPU_INSTANCE];
};

struct priv_queue {
	uint32_t object_type;
	uint64_t q_address;
	uint64_t q_size;
	uint64_t read_ptr_addr;
	uint64_t write_ptr_addr;
	uint64_t doorbell_off;
	uint64_t eop_ring_buffer_address;
	uint64_t ctx_save_restore_area_address;
	uint32_t gpu_id;
	uint32_t type;
	uint32_t format;
	uint32_t q_id;
	uint32_t priority;
	uint32_t q_percent;
	uint32_t doorbell_id;
	uint32_t gws;
	uint32_t sdma_id;
	uint32_t eop_ring_buffer_size;
	uint32_t ctx_save_restore_area_size;
	uint32_t ctl_stack_size;
	uint32_t mqd_size;
};

struct priv_event {
	uint32_t object_type;
	uint64_t user_handle;
	uint32_t event_id;
	uint32_t auto_reset;
	uint32_t type;
	uint32_t signaled;
	union {
		struct kfd_hsa_memory_exception_data memory_exception_data;
		struct kfd_hsa_hw_exception_data hw_exception_data;
	};
};

struct priv_svm_range {
	uint32_t object_type;
	uint64_t start_addr;
	uint64_t size;
	struct kfd_ioctl_svm_attribute attrs[];
};

/* An SVM range's attributes: 4 common, then one access attribute per device. */
#define SVM_COMMON_ATTRS 4

static const char *const op_names[] = {
	[KFD_CRIU_OP_PROCESS_INFO] = "PROCESS_INFO", [KFD_CRIU_OP_CHECKPOINT] = "CHECKPOINT",
	[KFD_CRIU_OP_UNPAUSE] = "UNPAUSE",	     [KFD_CRIU_OP_RESTORE] = "RESTORE",
	[KFD_CRIU_OP_RESUME] = "RESUME",
};

static uint64_t queue_priv_size(void)
{
	return sizeof(struct priv_queue) + sizeof(struct emu_mqd) + sizeof(struct emu_ctl_stack);
}

static uint64_t svm_priv_size(uint32_t nr_devices)
{
	return sizeof(struct priv_svm_range) +
	       (SVM_COMMON_ATTRS + nr_devices) * sizeof(struct kfd_ioctl_svm_attribute);
}

static uint64_t priv_data_size(const struct emu_process *proc)
{
	return sizeof(struct priv_process) + proc->nr_gpu_maps * sizeof(struct priv_device) +
	       (uint64_t)proc->nr_bos * sizeof(struct priv_bo) +
	       proc->nr_queues * queue_priv_size() + proc->nr_events * sizeof(struct priv_event) +
	       proc->nr_svm * svm_priv_size(proc->nr_gpu_maps);
}

static uint32_t nr_objects(const struct emu_process *proc)
{
	return proc->nr_queues + proc->nr_events + proc->nr_svm;
}

struct criu_reply {
	char *payload;
	uint64_t size;
	int *fds;
	uint32_t nr_fds;
};

static int reply_alloc(struct criu_reply *reply, uint64_t size, uint32_t nr_fds)
{
	reply->payload = calloc(1, size);
	reply->fds = calloc(nr_fds + 1, sizeof(int));
	if (!reply->payload || !reply->fds) {
		emu_err("no memory for a %llu-byte CRIU reply", (unsigned long long)size);
		return -ENOMEM;
	}
	reply->size = size;
	return 0;
}

static void reply_discard(struct criu_reply *reply)
{
	for (uint32_t i = 0; i < reply->nr_fds; i++)
		close(reply->fds[i]);
	free(reply->fds);
	free(reply->payload);
	memset(reply, 0, sizeof(*reply));
}

/* VRAM and GTT BOs hand out their dma-buf; the others have none (KFD_INVALID_FD). */
static int reply_add_bo_fd(struct criu_reply *reply, struct emu_bo *bo,
			   struct kfd_criu_bo_bucket *bucket)
{
	int ret;

	bucket->dmabuf_fd = KFDEMU_INVALID_FD;
	if (!(bo->alloc_flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT)))
		return 0;
	ret = emu_bo_export(bo, &reply->fds[reply->nr_fds]);
	if (ret)
		return ret;
	bucket->dmabuf_fd = reply->nr_fds++;
	return 0;
}

/* ---- PROCESS_INFO, UNPAUSE, RESUME ---- */

static int criu_process_info(struct emu_process *proc, struct kfd_ioctl_criu_args *args)
{
	proc->paused = true;
	emu_wait_for_kernels(proc);
	args->num_devices = proc->nr_gpu_maps;
	args->num_bos = proc->nr_bos;
	args->num_objects = nr_objects(proc);
	args->priv_data_size = priv_data_size(proc);
	args->pid = proc->pid;
	emu_info("pid %u: PROCESS_INFO: paused, %u devices, %u BOs, %u objects", proc->pid,
		 args->num_devices, args->num_bos, args->num_objects);
	return 0;
}

static int criu_unpause(struct emu_process *proc)
{
	if (!proc->paused) {
		emu_err("pid %u: UNPAUSE of a process that is not paused", proc->pid);
		return -EINVAL;
	}
	proc->paused = false;
	pthread_cond_broadcast(&emu_state_changed);
	emu_info("pid %u: UNPAUSE", proc->pid);
	return 0;
}

/* KFD acquires userptr pages at RESUME: the restored memory must be there by then. */
static int check_userptrs(struct emu_process *proc)
{
	for (uint32_t i = 0; i < proc->nr_bos; i++) {
		const struct emu_bo *bo = proc->bos[i];

		if ((bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) &&
		    emu_process_range_mapped(proc->pid, bo->user_addr, bo->size)) {
			emu_err("pid %u: RESUME: userptr BO %#llx: its memory %#llx is not mapped",
				proc->pid, (unsigned long long)bo->handle,
				(unsigned long long)bo->user_addr);
			return -EFAULT;
		}
	}
	return 0;
}

static int criu_resume(const struct kfd_ioctl_criu_args *args)
{
	struct emu_process *proc = emu_process_lookup(args->pid);
	int ret;

	if (!proc) {
		emu_err("RESUME: no live process with pid %u", args->pid);
		return -ESRCH;
	}
	if (!proc->awaiting_resume) {
		emu_err("RESUME: pid %u was not restored or is already running", args->pid);
		return -EINVAL;
	}
	ret = emu_svm_resume(proc);
	if (!ret)
		ret = check_userptrs(proc);
	if (ret)
		return ret;
	proc->awaiting_resume = false;
	pthread_cond_broadcast(&emu_state_changed);
	emu_info("pid %u: RESUME: %u queues run again", args->pid, proc->nr_queues);
	return 0;
}

/* ---- CHECKPOINT ---- */

static void checkpoint_devices(struct emu_process *proc, struct kfd_criu_device_bucket *devices)
{
	for (uint32_t i = 0; i < proc->nr_gpu_maps; i++) {
		devices[i].user_gpu_id = proc->gpu_map[i].user_gpu_id;
		devices[i].actual_gpu_id = proc->gpu_map[i].gpu->gpu_id;
	}
}

static int checkpoint_bos(struct emu_process *proc, struct kfd_criu_bo_bucket *bos,
			  struct priv_bo *privs, struct criu_reply *reply)
{
	for (uint32_t i = 0; i < proc->nr_bos; i++) {
		struct emu_bo *bo = proc->bos[i];
		int ret;

		bos[i] = (struct kfd_criu_bo_bucket){ .addr = bo->va_addr, .size = bo->size,
						      .offset = bo->mmap_offset,
						      .gpu_id = bo->user_gpu_id,
						      .alloc_flags = bo->alloc_flags };
		privs[i] = (struct priv_bo){ .user_addr = bo->user_addr, .idr_handle = bo->idr };
		privs[i].mapped_gpuids[0] = bo->user_gpu_id;
		ret = reply_add_bo_fd(reply, bo, &bos[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static char *checkpoint_queue(const struct emu_queue *queue, char *pos)
{
	struct priv_queue *q = (void *)pos;
	const struct kfdemu_create_queue *props = &queue->props;

	*q = (struct priv_queue){
		.object_type = OBJ_QUEUE, .q_address = props->ring_va, .q_size = props->ring_size,
		.read_ptr_addr = props->rptr_va, .write_ptr_addr = props->wptr_va,
		.doorbell_off = queue->doorbell_id * 8ULL, .eop_ring_buffer_address = props->eop_va,
		.ctx_save_restore_area_address = props->ctx_save_va, .gpu_id = props->gpu_id,
		.type = props->type, .q_id = queue->queue_id, .priority = props->priority,
		.q_percent = props->percent, .doorbell_id = queue->doorbell_id,
		.eop_ring_buffer_size = props->eop_size,
		.ctx_save_restore_area_size = props->ctx_save_size,
		.ctl_stack_size = sizeof(struct emu_ctl_stack), .mqd_size = sizeof(struct emu_mqd)
	};
	pos += sizeof(*q);
	memcpy(pos, &queue->mqd, sizeof(queue->mqd));
	pos += sizeof(queue->mqd);
	memcpy(pos, &queue->ctl, sizeof(queue->ctl));
	return pos + sizeof(queue->ctl);
}

static char *checkpoint_svm_range(struct emu_process *proc, const struct emu_svm_range *r,
				  char *pos)
{
	struct priv_svm_range *s = (void *)pos;
	uint32_t n = 0;

	s->object_type = OBJ_SVM_RANGE;
	s->start_addr = r->start;
	s->size = r->size;
	s->attrs[n++] = (struct kfd_ioctl_svm_attribute){ KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
							  r->preferred_loc };
	s->attrs[n++] = (struct kfd_ioctl_svm_attribute){ KFD_IOCTL_SVM_ATTR_PREFETCH_LOC,
							  r->prefetch_loc };
	s->attrs[n++] = (struct kfd_ioctl_svm_attribute){ KFD_IOCTL_SVM_ATTR_SET_FLAGS, r->flags };
	s->attrs[n++] = (struct kfd_ioctl_svm_attribute){ KFD_IOCTL_SVM_ATTR_GRANULARITY,
							  r->granularity };
	for (uint32_t i = 0; i < proc->nr_gpu_maps; i++)
		s->attrs[n++] = (struct kfd_ioctl_svm_attribute){ r->access[i],
								  proc->gpu_map[i].user_gpu_id };
	return pos + svm_priv_size(proc->nr_gpu_maps);
}

static void checkpoint_objects(struct emu_process *proc, char *pos)
{
	for (const struct emu_queue *queue = proc->queues; queue; queue = queue->next)
		pos = checkpoint_queue(queue, pos);
	for (const struct emu_event *ev = proc->events; ev; ev = ev->next) {
		struct priv_event *e = (void *)pos;

		*e = (struct priv_event){ .object_type = OBJ_EVENT, .event_id = ev->id,
					  .auto_reset = ev->auto_reset, .type = ev->type,
					  .signaled = ev->signaled };
		pos += sizeof(*e);
	}
	for (const struct emu_svm_range *r = proc->svm; r; r = r->next)
		pos = checkpoint_svm_range(proc, r, pos);
}

static int criu_checkpoint(struct emu_process *proc, struct kfd_ioctl_criu_args *args,
			   struct criu_reply *reply)
{
	struct kfd_criu_device_bucket *devices;
	struct kfd_criu_bo_bucket *bos;
	struct priv_process *priv;
	struct priv_device *dev_privs;
	struct priv_bo *bo_privs;
	int ret;

	if (!proc->paused) {
		emu_err("pid %u: CHECKPOINT before PROCESS_INFO", proc->pid);
		return -EINVAL;
	}
	if (args->num_devices != proc->nr_gpu_maps || args->num_bos != proc->nr_bos ||
	    args->num_objects != nr_objects(proc) || args->priv_data_size != priv_data_size(proc)) {
		emu_err("pid %u: CHECKPOINT sized for %u devices, %u BOs, %u objects, %llu bytes; the process has %u, %u, %u, %llu",
			proc->pid, args->num_devices, args->num_bos, args->num_objects,
			(unsigned long long)args->priv_data_size, proc->nr_gpu_maps, proc->nr_bos,
			nr_objects(proc), (unsigned long long)priv_data_size(proc));
		return -EINVAL;
	}
	ret = reply_alloc(reply,
			  sizeof(*args) + proc->nr_gpu_maps * sizeof(*devices) +
				  proc->nr_bos * sizeof(*bos) + args->priv_data_size,
			  proc->nr_bos);
	if (ret)
		return ret;
	devices = (void *)(reply->payload + sizeof(*args));
	bos = (void *)(devices + proc->nr_gpu_maps);
	priv = (void *)(bos + proc->nr_bos);
	*priv = (struct priv_process){ EMU_CRIU_PRIV_VERSION, proc->xnack_mode };
	dev_privs = (void *)(priv + 1);
	bo_privs = (void *)(dev_privs + proc->nr_gpu_maps);
	checkpoint_devices(proc, devices);
	ret = checkpoint_bos(proc, bos, bo_privs, reply);
	if (ret)
		return ret;
	checkpoint_objects(proc, (char *)(bo_privs + proc->nr_bos));
	memcpy(reply->payload, args, sizeof(*args));
	emu_info("pid %u: CHECKPOINT: %u BOs, %u dma-bufs handed out, %u objects", proc->pid,
		 proc->nr_bos, reply->nr_fds, nr_objects(proc));
	return 0;
}

/* ---- RESTORE ---- */

/* The request's arrays and private data, consumed in order as KFD consumes them. */
struct restore_input {
	const struct kfd_ioctl_criu_args *args;
	const struct kfd_criu_device_bucket *devices;
	const struct kfd_criu_bo_bucket *bos;
	const char *priv;
	uint64_t priv_offset;
	uint64_t drm_ino[EMU_MAX_GPUS]; /* the render node file of each device bucket */
	struct kfd_criu_bo_bucket *out_bos;
};

static const void *take_priv(struct restore_input *in, uint32_t pid, uint64_t size,
			     const char *what)
{
	const void *part = in->priv + in->priv_offset;

	if (in->priv_offset + size > in->args->priv_data_size || in->priv_offset + size < size) {
		emu_err("pid %u: RESTORE: private data ends inside %s (offset %llu, %llu bytes)", pid,
			what, (unsigned long long)in->priv_offset,
			(unsigned long long)in->args->priv_data_size);
		return NULL;
	}
	in->priv_offset += size;
	return part;
}

static int restore_process_priv(struct emu_process *proc, struct restore_input *in)
{
	const struct priv_process *priv = take_priv(in, proc->pid, sizeof(*priv), "the process");

	if (!priv)
		return -EINVAL;
	if (priv->version != EMU_CRIU_PRIV_VERSION || priv->xnack_mode > 1) {
		emu_err("pid %u: RESTORE: private data version %u (xnack %u); this KFD speaks %u",
			proc->pid, priv->version, priv->xnack_mode, EMU_CRIU_PRIV_VERSION);
		return -EINVAL;
	}
	proc->xnack_mode = priv->xnack_mode;
	return 0;
}

/* KFD: one bucket per GPU of the process, each with a render node to build its VM on. */
static int restore_devices(struct emu_process *proc, struct restore_input *in)
{
	uint32_t n = in->args->num_devices;

	if (n != emu_nr_gpus) {
		emu_err("pid %u: RESTORE: %u device buckets; a process here has %u GPUs", proc->pid,
			n, emu_nr_gpus);
		return -EINVAL;
	}
	if (!take_priv(in, proc->pid, n * sizeof(struct priv_device), "the devices"))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		const struct kfd_criu_device_bucket *dev = &in->devices[i];
		struct emu_gpu *gpu = emu_find_gpu(dev->actual_gpu_id);
		struct emu_gpu_map *map = NULL;
		int ret;

		for (uint32_t j = 0; gpu && j < emu_nr_gpus; j++)
			if (proc->gpu_map[j].gpu == gpu)
				map = &proc->gpu_map[j];
		for (uint32_t j = 0; j < i; j++)
			if (in->devices[j].user_gpu_id == dev->user_gpu_id ||
			    in->devices[j].actual_gpu_id == dev->actual_gpu_id)
				map = NULL;
		if (!dev->user_gpu_id || !map) {
			emu_err("pid %u: RESTORE: device bucket %u (user %#x -> actual %#x) names no GPU here or repeats one",
				proc->pid, i, dev->user_gpu_id, dev->actual_gpu_id);
			return -EINVAL;
		}
		map->user_gpu_id = dev->user_gpu_id;
		ret = emu_bind_render(proc, map, in->drm_ino[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int restore_one_bo(struct emu_process *proc, const struct kfd_criu_bo_bucket *bucket,
			  const struct priv_bo *priv, struct kfd_criu_bo_bucket *out)
{
	struct emu_gpu_map *map;
	struct emu_bo *bo;
	int ret;

	ret = emu_check_bo_shape(proc->pid, bucket->alloc_flags, bucket->addr, bucket->size);
	if (ret)
		return ret;
	map = emu_process_gpu(proc, bucket->gpu_id);
	if (!map)
		return -EINVAL;
	if (!priv->idr_handle || priv->idr_handle > INT32_MAX ||
	    !emu_va_range_free(proc, bucket->gpu_id, bucket->addr, bucket->size) ||
	    emu_lookup_bo(proc, (uint64_t)bucket->gpu_id << 32 | priv->idr_handle, NULL)) {
		emu_err("pid %u: RESTORE: BO %u on gpu %#x at va %#llx: bad id or collides with "
			"another",
			proc->pid, priv->idr_handle, bucket->gpu_id,
			(unsigned long long)bucket->addr);
		return -EINVAL;
	}
	/* As KFD with criu_resume: userptr pages are looked for at RESUME, not now. */
	ret = emu_bo_create(proc, map, priv->idr_handle, bucket->alloc_flags, bucket->addr,
			    bucket->size, priv->user_addr, &bo);
	if (ret)
		return ret;
	ret = emu_process_add_bo(proc, bo);
	if (ret) {
		emu_bo_release(bo);
		return ret;
	}
	if (priv->idr_handle >= proc->next_idr)
		proc->next_idr = priv->idr_handle + 1;
	/* Doorbell and MMIO offsets name the GPU the BO is on now; userptr BOs keep theirs. */
	if (!(bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR))
		out->restored_offset = bo->mmap_offset;
	return 0;
}

static int restore_bos(struct emu_process *proc, struct restore_input *in, struct criu_reply *reply)
{
	uint32_t n = in->args->num_bos;
	const struct priv_bo *privs = take_priv(in, proc->pid, n * sizeof(*privs), "the BOs");

	if (!privs)
		return -EINVAL;
	memcpy(in->out_bos, in->bos, n * sizeof(*in->out_bos));
	for (uint32_t i = 0; i < n; i++) {
		int ret = restore_one_bo(proc, &in->bos[i], &privs[i], &in->out_bos[i]);

		if (!ret)
			ret = reply_add_bo_fd(reply, proc->bos[proc->nr_bos - 1], &in->out_bos[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int check_queue_priv(struct emu_process *proc, const struct priv_queue *q,
			    const struct emu_mqd *mqd, const struct emu_ctl_stack *ctl)
{
	if (q->mqd_size != sizeof(*mqd) || q->ctl_stack_size != sizeof(*ctl) ||
	    mqd->magic != EMU_MQD_MAGIC || ctl->magic != EMU_CTL_MAGIC ||
	    mqd->queue_id != q->q_id || q->ctl_stack_size > q->ctx_save_restore_area_size ||
	    mqd->rptr > mqd->wptr) {
		emu_err("pid %u: RESTORE: queue %u: its MQD (%u bytes) or control stack (%u bytes) is not this KFD's",
			proc->pid, q->q_id, q->mqd_size, q->ctl_stack_size);
		return -EINVAL;
	}
	return emu_queue_check_ids(proc, q->q_id, q->doorbell_id);
}

static int restore_queue(struct emu_process *proc, struct restore_input *in)
{
	const struct priv_queue *q = take_priv(in, proc->pid, sizeof(*q), "a queue");
	const struct emu_mqd *mqd;
	const struct emu_ctl_stack *ctl;
	struct emu_gpu_map *map;
	struct emu_queue *queue;
	int ret;

	if (!q)
		return -EINVAL;
	mqd = take_priv(in, proc->pid, q->mqd_size, "a queue's MQD");
	ctl = mqd ? take_priv(in, proc->pid, q->ctl_stack_size, "a queue's control stack") : NULL;
	if (!ctl)
		return -EINVAL;
	ret = check_queue_priv(proc, q, mqd, ctl);
	map = ret ? NULL : emu_process_gpu(proc, q->gpu_id);
	if (!map)
		return ret ? ret : -EINVAL;
	queue = calloc(1, sizeof(*queue));
	if (!queue)
		return -ENOMEM;
	*queue = (struct emu_queue){
		.props = { .gpu_id = q->gpu_id, .type = q->type, .ring_va = q->q_address,
			   .ring_size = q->q_size, .rptr_va = q->read_ptr_addr,
			   .wptr_va = q->write_ptr_addr, .eop_va = q->eop_ring_buffer_address,
			   .eop_size = q->eop_ring_buffer_size,
			   .ctx_save_va = q->ctx_save_restore_area_address,
			   .ctx_save_size = q->ctx_save_restore_area_size, .priority = q->priority,
			   .percent = q->q_percent },
		.gpu = map->gpu, .queue_id = q->q_id, .doorbell_id = q->doorbell_id,
		.mqd = *mqd, .ctl = *ctl
	};
	ret = emu_queue_attach_bufs(proc, queue);
	if (ret) {
		free(queue);
		return ret;
	}
	emu_queue_link(proc, queue);
	return 0;
}

static int restore_event(struct emu_process *proc, struct restore_input *in)
{
	const struct priv_event *e = take_priv(in, proc->pid, sizeof(*e), "an event");

	if (!e)
		return -EINVAL;
	/* The emulator keeps the events page itself; a page the process gave is not emulated. */
	if (e->user_handle || e->auto_reset > 1 || e->signaled > 1) {
		emu_err("pid %u: RESTORE: event %u: user page %#llx, auto_reset %u, signaled %u",
			proc->pid, e->event_id, (unsigned long long)e->user_handle, e->auto_reset,
			e->signaled);
		return -EINVAL;
	}
	return emu_event_restore(proc, e->event_id, e->type, e->auto_reset, e->signaled);
}

static int restore_svm_range(struct emu_process *proc, struct restore_input *in)
{
	const struct priv_svm_range *s = take_priv(in, proc->pid, svm_priv_size(proc->nr_gpu_maps),
						   "an SVM range");
	struct emu_svm_range *range;
	uint32_t nattr = SVM_COMMON_ATTRS + proc->nr_gpu_maps;
	int ret;

	if (!s)
		return -EINVAL;
	if (!s->size || s->start_addr % EMU_PAGE_SIZE || s->size % EMU_PAGE_SIZE) {
		emu_err("pid %u: RESTORE: SVM range %#llx+%#llx is not page aligned", proc->pid,
			(unsigned long long)s->start_addr, (unsigned long long)s->size);
		return -EINVAL;
	}
	ret = emu_svm_check_attrs(proc, s->attrs, nattr);
	if (ret)
		return ret;
	range = calloc(1, sizeof(*range));
	if (!range)
		return -ENOMEM;
	range->start = s->start_addr;
	range->size = s->size;
	emu_svm_apply_attrs(proc, range, s->attrs, nattr);
	/* Applied at RESUME, once the process's memory is back (KFD keeps it as metadata). */
	range->next = proc->svm_pending;
	proc->svm_pending = range;
	proc->nr_svm_pending++;
	return 0;
}

static int restore_objects(struct emu_process *proc, struct restore_input *in)
{
	for (uint32_t i = 0; i < in->args->num_objects; i++) {
		const uint32_t *type = take_priv(in, proc->pid, 0, "an object");
		int ret;

		if (in->priv_offset + sizeof(*type) > in->args->priv_data_size) {
			emu_err("pid %u: RESTORE: private data ends before object %u", proc->pid, i);
			return -EINVAL;
		}
		switch (*type) {
		case OBJ_QUEUE:
			ret = restore_queue(proc, in);
			break;
		case OBJ_EVENT:
			ret = restore_event(proc, in);
			break;
		case OBJ_SVM_RANGE:
			ret = restore_svm_range(proc, in);
			break;
		default:
			emu_err("pid %u: RESTORE: object %u has type %u", proc->pid, i, *type);
			ret = -EINVAL;
		}
		if (ret)
			return ret;
	}
	return 0;
}

static int check_restorable(struct emu_process *proc, const struct kfd_ioctl_criu_args *args)
{
	if (proc->nr_bos || proc->restored || proc->nr_queues || proc->nr_events) {
		emu_err("pid %u: RESTORE into a process that already has GPU state or was restored",
			proc->pid);
		return -EINVAL;
	}
	/* KFD refuses a RESTORE without devices, BOs or private data. */
	if (!args->num_devices || !args->num_bos || !args->priv_data_size) {
		emu_err("pid %u: RESTORE with %u devices, %u BOs, %llu bytes of private data",
			proc->pid, args->num_devices, args->num_bos,
			(unsigned long long)args->priv_data_size);
		return -EINVAL;
	}
	return 0;
}

static void undo_restore(struct emu_process *proc)
{
	emu_process_clear(proc);
	proc->xnack_mode = 0;
}

static int criu_restore(struct emu_process *proc, struct kfd_ioctl_criu_args *args,
			struct restore_input *in, struct criu_reply *reply)
{
	int ret;

	ret = check_restorable(proc, args);
	if (!ret)
		ret = reply_alloc(reply, sizeof(*args) + args->num_bos * sizeof(*in->bos),
				  args->num_bos);
	if (ret)
		return ret;
	in->out_bos = (void *)(reply->payload + sizeof(*args));
	ret = restore_process_priv(proc, in);
	if (!ret)
		ret = restore_devices(proc, in);
	if (!ret)
		ret = restore_bos(proc, in, reply);
	if (!ret)
		ret = restore_objects(proc, in);
	if (!ret && in->priv_offset != args->priv_data_size) {
		emu_err("pid %u: RESTORE: %llu bytes of private data left over",
			proc->pid, (unsigned long long)(args->priv_data_size - in->priv_offset));
		ret = -EINVAL;
	}
	if (ret) {
		undo_restore(proc);
		return ret;
	}
	/* Queues stay evicted until RESUME: the restored task must not compute before. */
	proc->restored = true;
	proc->awaiting_resume = true;
	memcpy(reply->payload, args, sizeof(*args));
	emu_info("pid %u: RESTORE: %u BOs, %u objects on %u devices", proc->pid, args->num_bos,
		 args->num_objects, args->num_devices);
	return 0;
}

/*
 * Before the lock: the arrays are where the request says, and each device bucket's
 * render node is a render node of its GPU held by the restoring process (looked up in
 * the connection list, which is never searched under emu_lock).
 */
static int parse_restore(uint32_t pid, const struct kfd_ioctl_criu_args *args,
			 const void *request, uint64_t request_size, const int *fds,
			 uint32_t nr_fds, struct restore_input *in)
{
	const char *pos = (const char *)request + sizeof(*args);
	uint64_t expected;

	expected = sizeof(*args) + (uint64_t)args->num_devices * sizeof(*in->devices) +
		   (uint64_t)args->num_bos * sizeof(*in->bos) + args->priv_data_size;
	if (request_size != expected || args->num_devices > EMU_MAX_GPUS) {
		emu_err("pid %u: RESTORE: %llu request bytes for %u devices, %u BOs, %llu bytes of private data",
			pid, (unsigned long long)request_size, args->num_devices, args->num_bos,
			(unsigned long long)args->priv_data_size);
		return -EINVAL;
	}
	in->args = args;
	in->devices = (const void *)pos;
	in->bos = (const void *)(in->devices + args->num_devices);
	in->priv = (const char *)(in->bos + args->num_bos);
	for (uint32_t i = 0; i < args->num_devices; i++) {
		const struct kfd_criu_device_bucket *dev = &in->devices[i];
		struct emu_gpu *gpu = emu_find_gpu(dev->actual_gpu_id);

		if (dev->drm_fd >= nr_fds) {
			emu_err("pid %u: RESTORE: device bucket %u (gpu %#x): drm_fd is no open render node of the caller",
				pid, i, dev->actual_gpu_id);
			return -EINVAL;
		}
		if (!gpu) {
			emu_err("pid %u: RESTORE: device bucket %u: no GPU %#x here", pid, i,
				dev->actual_gpu_id);
			return -EINVAL;
		}
		if (emu_render_identify(fds[dev->drm_fd], gpu, pid, &in->drm_ino[i]))
			return -EINVAL;
	}
	return 0;
}

static int dispatch_criu_op(struct emu_process *proc, struct kfd_ioctl_criu_args *args,
			    struct restore_input *in, struct criu_reply *reply)
{
	int ret;

	/* RESUME names its process by pid: the caller is the checkpoint tool, not the task. */
	if (args->op == KFD_CRIU_OP_RESUME)
		return criu_resume(args);
	ret = emu_check_alive(proc);
	if (ret)
		return ret;
	switch (args->op) {
	case KFD_CRIU_OP_PROCESS_INFO:
		return criu_process_info(proc, args);
	case KFD_CRIU_OP_CHECKPOINT:
		return criu_checkpoint(proc, args, reply);
	case KFD_CRIU_OP_UNPAUSE:
		return criu_unpause(proc);
	case KFD_CRIU_OP_RESTORE:
		return criu_restore(proc, args, in, reply);
	}
	emu_err("pid %u: unknown CRIU op %u", proc->pid, args->op);
	return -EINVAL;
}

int emu_criu_op(struct emu_process *proc, const void *request, uint64_t request_size,
		const int *fds, uint32_t nr_fds, void **reply_payload, uint64_t *reply_size,
		int **reply_fds, uint32_t *nr_reply_fds)
{
	struct kfd_ioctl_criu_args args;
	struct restore_input in = {};
	struct criu_reply reply = {};
	int ret = 0;

	if (request_size < sizeof(args)) {
		emu_err("CRIU_OP: %llu-byte request, shorter than kfd_ioctl_criu_args",
			(unsigned long long)request_size);
		return -EINVAL;
	}
	memcpy(&args, request, sizeof(args));
	emu_debug("pid %u: CRIU op %s", emu_process_pid(proc),
		  args.op < sizeof(op_names) / sizeof(op_names[0]) ? op_names[args.op] : "unknown");
	if (args.op == KFD_CRIU_OP_RESTORE)
		ret = parse_restore(emu_process_pid(proc), &args, request, request_size, fds,
				    nr_fds, &in);
	else if (nr_fds)
		ret = -EINVAL;
	if (ret)
		return ret;
	pthread_mutex_lock(&emu_lock);
	ret = dispatch_criu_op(proc, &args, &in, &reply);
	pthread_mutex_unlock(&emu_lock);
	if (!ret && !reply.payload)
		ret = reply_alloc(&reply, sizeof(args), 0);
	if (ret) {
		reply_discard(&reply);
		return ret;
	}
	if (args.op != KFD_CRIU_OP_CHECKPOINT && args.op != KFD_CRIU_OP_RESTORE)
		memcpy(reply.payload, &args, sizeof(args));
	*reply_payload = reply.payload;
	*reply_size = reply.size;
	*reply_fds = reply.fds;
	*nr_reply_fds = reply.nr_fds;
	return 0;
}
