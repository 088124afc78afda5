/*
 * The KFD EMULATOR's user-mode queues and the engine that runs them: one thread walks
 * every queue of every process that is not evicted, notices doorbells, and runs packets
 * in steps of at most 1 MiB, so an eviction (PROCESS_INFO) waits for one step at most and
 * a packet preempted half way keeps its progress in the queue's control stack. Not a GPU.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu_state.h"

enum { BUF_RING, BUF_RPTR, BUF_WPTR, BUF_EOP, BUF_CTX, NR_BUFS };

static const char *const buf_names[NR_BUFS] = { "ring", "read pointer", "write pointer",
						"end-of-pipe buffer", "context save area" };

/* Queues in every process: the engine sleeps for good while there are none. */
static unsigned int nr_live_queues;

/* One step the engine runs outside the lock. */
struct engine_step {
	struct emu_process *proc;
	struct emu_queue *queue;
	struct kfdemu_packet packet;
	struct emu_bo *bo; /* the target BO, held; NULL for an SVM range */
	struct emu_mem mem; /* the packet's range, from its start */
	uint64_t offset;
	uint64_t len;
	uint64_t sum;
};

static void buf_range(const struct kfdemu_create_queue *props, int which, uint64_t *va,
		      uint64_t *size)
{
	switch (which) {
	case BUF_RING:
		*va = props->ring_va, *size = props->ring_size;
		break;
	case BUF_RPTR:
		*va = props->rptr_va, *size = 8;
		break;
	case BUF_WPTR:
		*va = props->wptr_va, *size = 8;
		break;
	case BUF_EOP:
		*va = props->eop_va, *size = props->eop_size;
		break;
	default:
		*va = props->ctx_save_va, *size = props->ctx_save_size;
		break;
	}
}

static void release_bufs(struct emu_queue *queue)
{
	for (int i = 0; i < NR_BUFS; i++) {
		if (!queue->bufs[i])
			continue;
		queue->bufs[i]->queue_users--;
		emu_bo_put(queue->bufs[i]);
		queue->bufs[i] = NULL;
	}
}

void emu_queue_free(struct emu_queue *queue)
{
	release_bufs(queue);
	nr_live_queues--;
	free(queue);
}

/* As KFD does for a new or restored queue: every buffer must lie in a BO of its GPU. */
int emu_queue_attach_bufs(struct emu_process *proc, struct emu_queue *queue)
{
	const uint32_t memory = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT |
				KFD_IOC_ALLOC_MEM_FLAGS_USERPTR;

	for (int i = 0; i < NR_BUFS; i++) {
		uint64_t va, size;
		struct emu_bo *bo;

		buf_range(&queue->props, i, &va, &size);
		bo = size ? emu_bo_at_va(proc, queue->props.gpu_id, va, size) : NULL;
		if (!bo || !(bo->alloc_flags & memory) || va % 8) {
			emu_err("pid %u: queue %u: its %s %#llx+%#llx is not memory in a BO of gpu %#x",
				proc->pid, queue->queue_id, buf_names[i], (unsigned long long)va,
				(unsigned long long)size, queue->props.gpu_id);
			release_bufs(queue);
			return -EINVAL;
		}
		bo->refs++;
		bo->queue_users++;
		queue->bufs[i] = bo;
	}
	return 0;
}

static struct emu_queue *find_queue(struct emu_process *proc, uint32_t queue_id)
{
	for (struct emu_queue *queue = proc->queues; queue; queue = queue->next)
		if (queue->queue_id == queue_id)
			return queue;
	return NULL;
}

int emu_queue_check_ids(struct emu_process *proc, uint32_t queue_id, uint32_t doorbell_id)
{
	if (queue_id >= EMU_MAX_QUEUES || doorbell_id >= KFDEMU_DOORBELLS_PER_SLICE) {
		emu_err("pid %u: queue id %u / doorbell %u out of range", proc->pid, queue_id,
			doorbell_id);
		return -EINVAL;
	}
	for (struct emu_queue *queue = proc->queues; queue; queue = queue->next) {
		if (queue->queue_id == queue_id || queue->doorbell_id == doorbell_id) {
			emu_err("pid %u: queue id %u or doorbell %u is taken", proc->pid, queue_id,
				doorbell_id);
			return -EINVAL;
		}
	}
	return 0;
}

void emu_queue_link(struct emu_process *proc, struct emu_queue *queue)
{
	queue->next = proc->queues;
	proc->queues = queue;
	proc->nr_queues++;
	nr_live_queues++;
	pthread_cond_broadcast(&emu_state_changed);
}

static int check_queue_props(uint32_t pid, const struct kfdemu_create_queue *req)
{
	if (req->type != KFD_IOC_QUEUE_TYPE_COMPUTE &&
	    req->type != KFD_IOC_QUEUE_TYPE_COMPUTE_AQL) {
		emu_err("pid %u: queue type %u: the emulator runs compute queues only", pid, req->type);
		return -EINVAL;
	}
	if (req->ring_size < 4 * KFDEMU_PACKET_SIZE || (req->ring_size & (req->ring_size - 1)) ||
	    req->ring_va % KFDEMU_PACKET_SIZE || !req->eop_size ||
	    req->ctx_save_size < sizeof(struct emu_ctl_stack)) {
		emu_err("pid %u: queue: ring %#llx+%#llx (a power of two of 64-byte packets), eop %#llx bytes, context save %#llx bytes",
			pid, (unsigned long long)req->ring_va, (unsigned long long)req->ring_size,
			(unsigned long long)req->eop_size, (unsigned long long)req->ctx_save_size);
		return -EINVAL;
	}
	return 0;
}

static int lowest_free_queue_id(struct emu_process *proc, uint32_t *queue_id)
{
	for (uint32_t id = 0; id < EMU_MAX_QUEUES; id++) {
		if (!find_queue(proc, id)) {
			*queue_id = id;
			return 0;
		}
	}
	emu_err("pid %u: all %d queues in use", proc->pid, EMU_MAX_QUEUES);
	return -ENOSPC;
}

static int create_queue_locked(struct emu_process *proc, const struct kfdemu_create_queue *req,
			       struct kfdemu_queue_reply *reply)
{
	struct emu_gpu_map *map;
	struct emu_queue *queue;
	uint32_t queue_id;
	int ret;

	ret = emu_check_alive(proc);
	if (!ret)
		ret = check_queue_props(proc->pid, req);
	if (ret)
		return ret;
	map = emu_process_gpu(proc, req->gpu_id);
	if (!map)
		return -EINVAL;
	ret = lowest_free_queue_id(proc, &queue_id);
	if (ret)
		return ret;
	queue = calloc(1, sizeof(*queue));
	if (!queue)
		return -ENOMEM;
	*queue = (struct emu_queue){ .props = *req, .gpu = map->gpu, .queue_id = queue_id,
				     .doorbell_id = queue_id };
	queue->mqd = (struct emu_mqd){ .magic = EMU_MQD_MAGIC, .queue_id = queue_id };
	queue->ctl = (struct emu_ctl_stack){ .magic = EMU_CTL_MAGIC };
	ret = emu_queue_attach_bufs(proc, queue);
	if (ret) {
		free(queue);
		return ret;
	}
	emu_queue_link(proc, queue);
	reply->queue_id = queue_id;
	reply->doorbell_offset = (uint64_t)queue->doorbell_id * 8;
	emu_info("pid %u: queue %u on gpu %#x: ring %#llx+%#llx", proc->pid, queue_id, req->gpu_id,
		 (unsigned long long)req->ring_va, (unsigned long long)req->ring_size);
	return 0;
}

int emu_create_queue(struct emu_process *proc, const struct kfdemu_create_queue *req,
		     struct kfdemu_queue_reply *reply)
{
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = create_queue_locked(proc, req, reply);
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

int emu_destroy_queue(struct emu_process *proc, uint32_t queue_id)
{
	struct emu_queue *queue, **link;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = emu_check_alive(proc);
	for (link = &proc->queues; !ret && *link && (*link)->queue_id != queue_id;)
		link = &(*link)->next;
	queue = ret ? NULL : *link;
	if (!ret && !queue) {
		emu_err("pid %u: no queue %u", proc->pid, queue_id);
		ret = -EINVAL;
	}
	if (queue) {
		while (queue->busy)
			pthread_cond_wait(&emu_state_changed, &emu_lock);
		*link = queue->next;
		proc->nr_queues--;
		emu_queue_free(queue);
	}
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

/* ---- the engine ---- */

static void buf_mem(const struct emu_queue *queue, int which, uint64_t va, struct emu_mem *mem)
{
	const struct emu_bo *bo = queue->bufs[which];

	emu_bo_mem(bo, va - bo->va_addr, mem);
}

static int map_index(const struct emu_process *proc, const struct emu_queue *queue)
{
	for (uint32_t i = 0; i < proc->nr_gpu_maps; i++)
		if (proc->gpu_map[i].user_gpu_id == queue->props.gpu_id)
			return i;
	return 0;
}

/* The memory a packet names: a BO of the queue's GPU, or an SVM range the GPU may use. */
static int resolve_va(struct emu_process *proc, const struct emu_queue *queue, uint64_t va,
		      uint64_t len, struct emu_mem *mem, struct emu_bo **bo_out)
{
	const uint32_t memory = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT |
				KFD_IOC_ALLOC_MEM_FLAGS_USERPTR;
	struct emu_bo *bo = emu_bo_at_va(proc, queue->props.gpu_id, va, len);

	*bo_out = NULL;
	if (bo && (bo->alloc_flags & memory)) {
		emu_bo_mem(bo, va - bo->va_addr, mem);
		*bo_out = bo;
		return 0;
	}
	if (emu_svm_find(proc, va, len, map_index(proc, queue))) {
		*mem = (struct emu_mem){ .fd = -1, .pid = proc->pid, .addr = va };
		return 0;
	}
	emu_err("pid %u: queue %u: VA %#llx+%#llx is no BO or accessible SVM range of gpu %#x: the queue stops (VM fault)",
		proc->pid, queue->queue_id, (unsigned long long)va, (unsigned long long)len,
		queue->props.gpu_id);
	return -EFAULT;
}

static int write_u64_at(struct emu_process *proc, const struct emu_queue *queue, uint64_t va,
			uint64_t value)
{
	struct emu_mem mem;
	struct emu_bo *bo;
	int ret = resolve_va(proc, queue, va, 8, &mem, &bo);

	return ret ? ret : emu_mem_write(&mem, &value, 8, 0);
}

/* A doorbell rung since the last look: the write pointer it announces is read now. */
static void look_at_doorbell(struct emu_process *proc, struct emu_queue *queue)
{
	struct emu_mem doorbell = { .fd = proc->kfd_fd,
				    .base = emu_kfd_offset(KFDEMU_MMAP_TYPE_DOORBELL, queue->gpu) +
					    queue->doorbell_id * 8ULL };
	struct emu_mem wptr;
	uint64_t value;

	if (emu_mem_read(&doorbell, &value, 8, 0) || value == queue->mqd.doorbell)
		return;
	queue->mqd.doorbell = value;
	buf_mem(queue, BUF_WPTR, queue->props.wptr_va, &wptr);
	if (!emu_mem_read(&wptr, &value, 8, 0))
		queue->mqd.wptr = value;
}

static int load_packet(struct emu_process *proc, struct emu_queue *queue, struct engine_step *step)
{
	uint64_t slots = queue->props.ring_size / KFDEMU_PACKET_SIZE;
	uint64_t slot_va = queue->props.ring_va + (queue->mqd.rptr % slots) * KFDEMU_PACKET_SIZE;
	struct kfdemu_packet *packet = &step->packet;
	struct emu_mem ring;
	int ret;

	buf_mem(queue, BUF_RING, slot_va, &ring);
	ret = emu_mem_read(&ring, packet, sizeof(*packet), 0);
	if (ret)
		return ret;
	if (packet->op < KFDEMU_KERNEL_FILL || packet->op > KFDEMU_KERNEL_NOP ||
	    (packet->op != KFDEMU_KERNEL_NOP && (packet->va % 8 || packet->length % 8))) {
		emu_err("pid %u: queue %u: packet %llu: op %u va %#llx length %#llx is malformed",
			proc->pid, queue->queue_id, (unsigned long long)queue->mqd.rptr, packet->op,
			(unsigned long long)packet->va, (unsigned long long)packet->length);
		return -EINVAL;
	}
	if (packet->op == KFDEMU_KERNEL_NOP) {
		step->len = 0;
		return 0;
	}
	ret = resolve_va(proc, queue, packet->va, packet->length, &step->mem, &step->bo);
	if (ret)
		return ret;
	step->offset = queue->ctl.progress;
	step->len = packet->length - step->offset < EMU_STEP ? packet->length - step->offset :
							       EMU_STEP;
	step->sum = queue->ctl.partial;
	return 0;
}

static void fault_queue(struct emu_queue *queue)
{
	queue->mqd.faulted = 1;
}

/* The next step of work anywhere, made ready under the lock; false when there is none. */
static bool find_work(struct engine_step *step)
{
	for (struct emu_process *proc = emu_process_first(); proc; proc = proc->next) {
		if (proc->dead || proc->paused || proc->awaiting_resume)
			continue;
		for (struct emu_queue *queue = proc->queues; queue; queue = queue->next) {
			if (queue->busy || queue->mqd.faulted)
				continue;
			look_at_doorbell(proc, queue);
			if (queue->mqd.rptr >= queue->mqd.wptr)
				continue;
			*step = (struct engine_step){ .proc = proc, .queue = queue };
			if (load_packet(proc, queue, step)) {
				fault_queue(queue);
				continue;
			}
			if (step->bo)
				step->bo->refs++;
			queue->busy = true;
			queue->ctl.in_flight = 1;
			proc->running_kernels++;
			return true;
		}
	}
	return false;
}

static void complete_packet(struct engine_step *step)
{
	struct emu_process *proc = step->proc;
	struct emu_queue *queue = step->queue;
	const struct kfdemu_packet *packet = &step->packet;
	struct emu_mem rptr;
	int ret = 0;

	if (packet->op == KFDEMU_KERNEL_CHECKSUM && packet->result_va)
		ret = write_u64_at(proc, queue, packet->result_va, step->sum);
	if (!ret && packet->completion_va)
		ret = write_u64_at(proc, queue, packet->completion_va, packet->completion_value);
	if (ret) {
		fault_queue(queue);
		return;
	}
	if (packet->flags & KFDEMU_PACKET_SIGNAL_EVENT)
		emu_event_signal(proc, packet->event_id);
	queue->mqd.rptr++;
	queue->ctl = (struct emu_ctl_stack){ .magic = EMU_CTL_MAGIC };
	buf_mem(queue, BUF_RPTR, queue->props.rptr_va, &rptr);
	emu_mem_write(&rptr, &queue->mqd.rptr, 8, 0);
}

static void finish_step(struct engine_step *step, int ret)
{
	struct emu_queue *queue = step->queue;

	step->proc->running_kernels--;
	queue->busy = false;
	if (step->bo)
		emu_bo_put(step->bo);
	/* The process died meanwhile: its queues are gone with it. */
	if (!step->proc->dead) {
		if (ret) {
			fault_queue(queue);
		} else {
			queue->ctl.progress = step->offset + step->len;
			queue->ctl.partial = step->sum;
			if (queue->ctl.progress == step->packet.length)
				complete_packet(step);
		}
	}
	pthread_cond_broadcast(&emu_state_changed);
}

static void *engine_main(void *arg)
{
	struct engine_step step;
	int ret;

	(void)arg;
	pthread_mutex_lock(&emu_lock);
	for (;;) {
		if (find_work(&step)) {
			pthread_mutex_unlock(&emu_lock);
			ret = step.len ? emu_kernel_step(step.packet.op, step.packet.arg, &step.mem,
							 step.offset, step.len, &step.sum) :
					 0;
			pthread_mutex_lock(&emu_lock);
			finish_step(&step, ret);
			continue;
		}
		if (!nr_live_queues) {
			pthread_cond_wait(&emu_state_changed, &emu_lock);
		} else {
			/* Doorbells are memory: look again in a millisecond. */
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += 1000000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&emu_state_changed, &emu_lock, &until);
		}
	}
	return NULL;
}

int emu_engine_start(void)
{
	pthread_t thread;
	int ret = pthread_create(&thread, NULL, engine_main, NULL);

	if (ret) {
		emu_err("cannot start the queue engine: %s", strerror(ret));
		return -ret;
	}
	pthread_detach(thread);
	return 0;
}
