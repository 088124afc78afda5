/*
 * A process computing on the KFD EMULATOR's user-mode queues while it is dumped: it keeps
 * submitting packets (ADDs over a 16 MiB VRAM BO on each GPU, an ADD on an SVM range of
 * its own memory every few rounds) through rings, write pointers and doorbells in its own
 * mappings, and waits for each round by polling completion signals in memory, as a ROCm
 * runtime does: no request to the emulator is in flight when criu freezes it. After
 * restore the queues finish what they were preempted in, the process goes on submitting,
 * and on SIGTERM it checks every result against what it computed on the CPU: the data
 * (CHECKSUM packets), its events (a signal event the packets set, a debug event set and
 * auto-reset), its SVM range's attributes and memory, and its doorbell and MMIO mappings.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libkfdemu.h"
#include "zdtmtst.h"

#define KIB 1024ULL
#define MIB (1024 * KIB)
#define DATA_SIZE (16 * MIB)
#define RING_SLOTS 64
/* In each GPU's control BO: the ring, then the pointers and signals, eop, context save. */
#define RING_OFF 0
#define RPTR_OFF 0x1000
#define WPTR_OFF 0x1008
#define DONE_OFF 0x1010
#define SUM_OFF 0x1018
#define EOP_OFF 0x2000
#define CTX_OFF 0x4000
#define CTX_SIZE 0x10000
#define CTL_SIZE (CTX_OFF + CTX_SIZE)
#define SVM_SIZE (1 * MIB)
#define SVM_EVERY 4
#define BASE_VALUE 0x1000
/* Polling a completion signal: this long at most before the queue counts as stuck. */
#define ROUND_TIMEOUT_US (60 * 1000 * 1000)

struct gpu_queue {
	struct kfdemu_bo_info ctl, data, doorbell, mmio;
	uint8_t *ctl_map;
	uint64_t *bell;
	uint32_t *mmio_map;
	struct kfdemu_queue_reply queue;
	uint64_t submitted; /* packets published */
};

static struct kfdemu_device dev;
static struct gpu_queue queues[2];
static struct kfdemu_event_reply round_event, debug_event;
static uint32_t *svm_mem;
/* What the CPU expects: every data word, and every SVM word. */
static uint32_t data_value = BASE_VALUE;
static uint32_t svm_value = 1;

static void check(int ret, const char *what)
{
	if (ret)
		test_fail("%s: %s", what, strerror(-ret));
}

static volatile uint64_t *ctl_u64(struct gpu_queue *q, uint64_t off)
{
	return (volatile uint64_t *)(q->ctl_map + off);
}

/* Write the packet into the ring, then publish it: write pointer, then the doorbell. */
static void submit(struct gpu_queue *q, const struct kfdemu_packet *packet)
{
	uint64_t slot = q->submitted % RING_SLOTS;

	memcpy(q->ctl_map + RING_OFF + slot * KFDEMU_PACKET_SIZE, packet, sizeof(*packet));
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*ctl_u64(q, WPTR_OFF) = ++q->submitted;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	q->bell[q->queue.doorbell_offset / 8] = q->submitted;
}

/* Until the GPU wrote value to the signal: no request to the emulator meanwhile. */
static void wait_signal(struct gpu_queue *q, uint64_t value, const char *what)
{
	long waited = 0;

	while (*ctl_u64(q, DONE_OFF) != value) {
		if (waited > ROUND_TIMEOUT_US)
			test_fail("%s: the queue never signalled %" PRIu64 " (it says %" PRIu64 ", read pointer %" PRIu64 ")",
				  what, value, *ctl_u64(q, DONE_OFF), *ctl_u64(q, RPTR_OFF));
		usleep(500);
		waited += 500;
	}
}

static void setup_queue(int i)
{
	struct gpu_queue *q = &queues[i];
	uint32_t gpu = dev.gpus[i].gpu_id;
	struct kfdemu_create_queue create;

	check(kfdemu_alloc_bo(dev.kfd, gpu, KFD_IOC_ALLOC_MEM_FLAGS_GTT, CTL_SIZE, 0, &q->ctl),
	      "alloc control BO");
	check(kfdemu_alloc_bo(dev.kfd, gpu, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, DATA_SIZE, 0, &q->data),
	      "alloc data BO");
	check(kfdemu_alloc_bo(dev.kfd, gpu, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL, KFDEMU_DOORBELL_SLICE,
			      0, &q->doorbell),
	      "alloc doorbells");
	check(kfdemu_alloc_bo(dev.kfd, gpu, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
			      KFDEMU_MMIO_PAGE_SIZE, 0, &q->mmio),
	      "alloc MMIO page");
	check(kfdemu_device_map_bo(&dev, &q->ctl, (void **)&q->ctl_map), "map control BO");
	check(kfdemu_device_map_bo(&dev, &q->doorbell, (void **)&q->bell), "map doorbells");
	check(kfdemu_device_map_bo(&dev, &q->mmio, (void **)&q->mmio_map), "map MMIO page");
	create = (struct kfdemu_create_queue){
		.gpu_id = gpu, .type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
		.ring_va = q->ctl.va_addr + RING_OFF, .ring_size = RING_SLOTS * KFDEMU_PACKET_SIZE,
		.rptr_va = q->ctl.va_addr + RPTR_OFF, .wptr_va = q->ctl.va_addr + WPTR_OFF,
		.eop_va = q->ctl.va_addr + EOP_OFF, .eop_size = 4 * KIB,
		.ctx_save_va = q->ctl.va_addr + CTX_OFF, .ctx_save_size = CTX_SIZE
	};
	check(kfdemu_create_queue(dev.kfd, &create, &q->queue), "create queue");
	submit(q, &(struct kfdemu_packet){ .op = KFDEMU_KERNEL_FILL, .arg = BASE_VALUE,
					   .va = q->data.va_addr, .length = DATA_SIZE,
					   .completion_va = q->ctl.va_addr + DONE_OFF,
					   .completion_value = 1 });
}

static void setup_svm(void)
{
	struct kfd_ioctl_svm_attribute attrs[] = {
		{ KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, dev.gpus[1].gpu_id },
		{ KFD_IOCTL_SVM_ATTR_ACCESS, dev.gpus[0].gpu_id },
		{ KFD_IOCTL_SVM_ATTR_SET_FLAGS, KFD_IOCTL_SVM_FLAG_GPU_RO },
		{ KFD_IOCTL_SVM_ATTR_GRANULARITY, 5 },
	};
	uint32_t i;

	svm_mem = mmap(NULL, SVM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (svm_mem == MAP_FAILED)
		test_fail_errno("mmap");
	for (i = 0; i < SVM_SIZE / 4; i++)
		svm_mem[i] = svm_value;
	check(kfdemu_svm(dev.kfd, KFD_IOCTL_SVM_OP_SET_ATTR, (uintptr_t)svm_mem, SVM_SIZE, attrs,
			 4),
	      "SVM attributes");
}

static void setup(void)
{
	check(kfdemu_device_open(NULL, &dev), "open the KFD emulator and its render nodes");
	if (dev.nr_gpus < 2)
		test_fail("the emulator has %u GPUs, the test needs 2", dev.nr_gpus);
	check(kfdemu_create_event(dev.kfd, KFD_IOC_EVENT_SIGNAL, false, &round_event), "signal event");
	check(kfdemu_create_event(dev.kfd, KFD_IOC_EVENT_DEBUG_EVENT, true, &debug_event),
	      "debug event");
	check(kfdemu_set_event(dev.kfd, debug_event.event_id), "set the debug event");
	setup_svm();
	setup_queue(0);
	setup_queue(1);
	wait_signal(&queues[0], 1, "FILL on GPU 0");
	wait_signal(&queues[1], 1, "FILL on GPU 1");
}

/* One round: ADD round on both GPUs (and on the SVM range now and then), then wait. */
static void run_round(uint64_t round)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct gpu_queue *q = &queues[i];

		if (i == 0 && round % SVM_EVERY == 0)
			submit(q, &(struct kfdemu_packet){ .op = KFDEMU_KERNEL_ADD, .arg = 2,
							   .va = (uintptr_t)svm_mem,
							   .length = SVM_SIZE });
		submit(q, &(struct kfdemu_packet){
				  .op = KFDEMU_KERNEL_ADD, .arg = (uint32_t)round,
				  .va = q->data.va_addr, .length = DATA_SIZE,
				  .completion_va = q->ctl.va_addr + DONE_OFF,
				  .completion_value = round + 1,
				  .flags = i ? KFDEMU_PACKET_SIGNAL_EVENT : 0,
				  .event_id = round_event.event_id });
	}
	if (round % SVM_EVERY == 0)
		svm_value += 2;
	data_value += (uint32_t)round;
	for (i = 0; i < 2; i++)
		wait_signal(&queues[i], round + 1, "a round");
}

static bool sigterm_pending(void)
{
	sigset_t pending;

	return !sigpending(&pending) && sigismember(&pending, SIGTERM);
}

/* The device's CHECKSUM of a data BO, by a packet, against the CPU's expectation. */
static void check_data(struct gpu_queue *q, uint64_t round, int gpu)
{
	static uint32_t words[MIB / 4];
	uint64_t expected = 0, off, i;

	submit(q, &(struct kfdemu_packet){.op = KFDEMU_KERNEL_CHECKSUM,
					  .va = q->data.va_addr,
					  .length = DATA_SIZE,
					  .result_va = q->ctl.va_addr + SUM_OFF,
					  .completion_va = q->ctl.va_addr + DONE_OFF,
					  .completion_value = round + 1});
	wait_signal(q, round + 1, "CHECKSUM");
	for (i = 0; i < MIB / 4; i++)
		words[i] = data_value;
	for (off = 0; off < DATA_SIZE; off += MIB)
		expected += kfdemu_checksum(words, MIB, off);
	if (*ctl_u64(q, SUM_OFF) != expected)
		test_fail("GPU %d: data checksum %#" PRIx64 ", the CPU expects %#" PRIx64 " (every word %#x)",
			  gpu, *ctl_u64(q, SUM_OFF), expected, data_value);
}

static void check_events(void)
{
	uint32_t id = round_event.event_id, result;

	check(kfdemu_wait_events(dev.kfd, &id, 1, false, 0, &result), "wait for the round event");
	if (result != KFDEMU_WAIT_COMPLETE)
		test_fail("the signal event the packets set is not signalled");
	id = debug_event.event_id;
	check(kfdemu_wait_events(dev.kfd, &id, 1, false, 0, &result), "wait for the debug event");
	if (result != KFDEMU_WAIT_COMPLETE)
		test_fail("the debug event set before the dump is not signalled");
	check(kfdemu_wait_events(dev.kfd, &id, 1, false, 0, &result), "wait again");
	if (result != KFDEMU_WAIT_TIMEOUT)
		test_fail("the auto-reset debug event stayed signalled after a wait");
}

static void check_svm(void)
{
	struct kfd_ioctl_svm_attribute attrs[] = {
		{KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0},
		{KFD_IOCTL_SVM_ATTR_ACCESS, dev.gpus[0].gpu_id},
		{KFD_IOCTL_SVM_ATTR_ACCESS, dev.gpus[1].gpu_id},
		{KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0},
		{KFD_IOCTL_SVM_ATTR_GRANULARITY, 0},
	};
	uint32_t i;

	check(kfdemu_svm(dev.kfd, KFD_IOCTL_SVM_OP_GET_ATTR, (uintptr_t)svm_mem, SVM_SIZE, attrs,
			 5),
	      "SVM attributes after restore");
	if (attrs[0].value != dev.gpus[1].gpu_id || attrs[1].type != KFD_IOCTL_SVM_ATTR_ACCESS ||
	    attrs[2].type != KFD_IOCTL_SVM_ATTR_NO_ACCESS ||
	    !(attrs[3].value & KFD_IOCTL_SVM_FLAG_GPU_RO) || attrs[4].value != 5)
		test_fail("SVM attributes: preferred %#x, access %u/%u, flags %#x, granularity %u",
			  attrs[0].value, attrs[1].type, attrs[2].type, attrs[3].value,
			  attrs[4].value);
	for (i = 0; i < SVM_SIZE / 4; i++)
		if (svm_mem[i] != svm_value)
			test_fail("SVM word %u is %#x, the CPU expects %#x", i, svm_mem[i], svm_value);
}

int main(int argc, char **argv)
{
	uint64_t round = 1;
	char line[512];

	test_init(argc, argv);
	setup();
	test_ready();
	/* Computing until told to stop: the dump and the restore happen somewhere in here. */
	while (!sigterm_pending())
		run_round(round++);
	test_wait_sigterm();

	run_round(round++);
	check_data(&queues[0], round, 0);
	check_data(&queues[1], round, 1);
	check_events();
	check_svm();
	maps_line(queues[1].bell, line, sizeof(line));
	if (!strstr(line, "/memfd:kfdemu-kfd"))
		test_fail("the doorbells are no longer mapped through /dev/kfd: %s", line);
	test_pass();
}
