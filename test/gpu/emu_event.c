/*
 * The KFD EMULATOR's events: signal and debug events, each with a slot in the process's
 * events page (in its /dev/kfd space, as KFD's own signal page), set by the process or
 * by a queue packet, waited for with auto-reset semantics. Not a GPU.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "emu_state.h"

static bool slot_event(uint32_t type)
{
	return type == KFD_IOC_EVENT_SIGNAL || type == KFD_IOC_EVENT_DEBUG_EVENT;
}

static struct emu_event *find_event(struct emu_process *proc, uint32_t id)
{
	for (struct emu_event *ev = proc->events; ev; ev = ev->next)
		if (ev->id == id)
			return ev;
	return NULL;
}

/* The slot says what the event's state is: its id once signalled, else UNSIGNALED. */
static void write_slot(struct emu_process *proc, const struct emu_event *ev)
{
	struct emu_mem page = { .fd = proc->kfd_fd,
				.base = emu_kfd_offset(KFDEMU_MMAP_TYPE_EVENTS, NULL) };
	uint64_t value = ev->signaled ? ev->id : KFDEMU_EVENT_SLOT_UNSIGNALED;

	if (slot_event(ev->type))
		emu_mem_write(&page, &value, 8, ev->id * 8ULL);
}

static void set_state(struct emu_process *proc, struct emu_event *ev, bool signaled)
{
	ev->signaled = signaled;
	write_slot(proc, ev);
	pthread_cond_broadcast(&emu_state_changed);
}

static int add_event(struct emu_process *proc, uint32_t id, uint32_t type, bool auto_reset,
		     bool signaled)
{
	struct emu_event *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return -ENOMEM;
	*ev = (struct emu_event){ .next = proc->events, .id = id, .type = type,
				  .auto_reset = auto_reset };
	proc->events = ev;
	proc->nr_events++;
	set_state(proc, ev, signaled);
	return 0;
}

static int free_slot_id(struct emu_process *proc, uint32_t *id)
{
	/* Slot 0 stays unused: an id of 0 reads as "no event" in a packet. */
	for (uint32_t i = 1; i < KFD_SIGNAL_EVENT_LIMIT; i++) {
		if (!find_event(proc, i)) {
			*id = i;
			return 0;
		}
	}
	emu_err("pid %u: all %d signal event slots in use", proc->pid, KFD_SIGNAL_EVENT_LIMIT);
	return -ENOSPC;
}

int emu_create_event(struct emu_process *proc, const struct kfdemu_create_event *req,
		     struct kfdemu_event_reply *reply)
{
	uint32_t id = 0;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = emu_check_alive(proc);
	if (!ret && !slot_event(req->type)) {
		emu_err("pid %u: event type %u: the emulator has signal and debug events only",
			proc->pid, req->type);
		ret = -EINVAL;
	}
	if (!ret)
		ret = free_slot_id(proc, &id);
	if (!ret)
		ret = add_event(proc, id, req->type, req->auto_reset, false);
	pthread_mutex_unlock(&emu_lock);
	if (ret)
		return ret;
	*reply = (struct kfdemu_event_reply){
		.event_id = id, .slot_index = id,
		.page_mmap_offset = emu_kfd_offset(KFDEMU_MMAP_TYPE_EVENTS, NULL)
	};
	return 0;
}

/* The event, or an error naming it; under emu_lock. */
static int lookup(struct emu_process *proc, uint32_t id, struct emu_event **ev)
{
	int ret = emu_check_alive(proc);

	if (ret)
		return ret;
	*ev = find_event(proc, id);
	if (*ev)
		return 0;
	emu_err("pid %u: no event %u", proc->pid, id);
	return -EINVAL;
}

int emu_destroy_event(struct emu_process *proc, uint32_t event_id)
{
	struct emu_event *ev;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = lookup(proc, event_id, &ev);
	if (!ret) {
		for (struct emu_event **link = &proc->events; *link; link = &(*link)->next) {
			if (*link == ev) {
				*link = ev->next;
				break;
			}
		}
		proc->nr_events--;
		ev->signaled = false;
		write_slot(proc, ev);
		free(ev);
		pthread_cond_broadcast(&emu_state_changed);
	}
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

static int change_event(struct emu_process *proc, uint32_t event_id, bool signaled)
{
	struct emu_event *ev;
	int ret;

	pthread_mutex_lock(&emu_lock);
	ret = lookup(proc, event_id, &ev);
	if (!ret)
		set_state(proc, ev, signaled);
	pthread_mutex_unlock(&emu_lock);
	return ret;
}

int emu_set_event(struct emu_process *proc, uint32_t event_id)
{
	return change_event(proc, event_id, true);
}

int emu_reset_event(struct emu_process *proc, uint32_t event_id)
{
	return change_event(proc, event_id, false);
}

/* A queue's packet asks for it; an event destroyed meanwhile is only worth a warning. */
void emu_event_signal(struct emu_process *proc, uint32_t event_id)
{
	struct emu_event *ev = find_event(proc, event_id);

	if (ev)
		set_state(proc, ev, true);
	else
		emu_warn("pid %u: a packet signals event %u, which does not exist", proc->pid,
			 event_id);
}

/* Whether the wait is over; if so, auto-reset events it consumed are reset. */
static int wait_done(struct emu_process *proc, const struct kfdemu_wait_events *req,
		     const uint32_t *ids, bool *done)
{
	uint32_t nr_signaled = 0;
	struct emu_event *ev;
	int ret;

	for (uint32_t i = 0; i < req->nr_events; i++) {
		ret = lookup(proc, ids[i], &ev);
		if (ret)
			return ret;
		nr_signaled += ev->signaled;
	}
	*done = req->wait_for_all ? nr_signaled == req->nr_events : nr_signaled > 0;
	for (uint32_t i = 0; *done && i < req->nr_events; i++) {
		ev = find_event(proc, ids[i]);
		if (ev->signaled && ev->auto_reset)
			set_state(proc, ev, false);
	}
	return 0;
}

int emu_wait_events(struct emu_process *proc, const struct kfdemu_wait_events *req,
		    const uint32_t *ids, uint32_t *result)
{
	struct timespec until;
	bool done = false;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += req->timeout_ms / 1000;
	until.tv_nsec += (req->timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&emu_lock);
	for (;;) {
		ret = wait_done(proc, req, ids, &done);
		if (ret || done)
			break;
		if (pthread_cond_timedwait(&emu_state_changed, &emu_lock, &until) == ETIMEDOUT) {
			ret = wait_done(proc, req, ids, &done);
			break;
		}
	}
	pthread_mutex_unlock(&emu_lock);
	*result = done ? KFDEMU_WAIT_COMPLETE : KFDEMU_WAIT_TIMEOUT;
	return ret;
}

int emu_event_restore(struct emu_process *proc, uint32_t id, uint32_t type, bool auto_reset,
		      bool signaled)
{
	bool id_ok = slot_event(type) && id > 0 && id < KFD_SIGNAL_EVENT_LIMIT;

	if (!id_ok || find_event(proc, id)) {
		emu_err("pid %u: RESTORE: event %u of type %u: %s", proc->pid, id, type,
			!slot_event(type) ? "not a signal or debug event" :
			!id_ok		  ? "its id is no slot of the events page" :
					    "its id is taken");
		return -EINVAL;
	}
	return add_event(proc, id, type, auto_reset, signaled);
}

void emu_events_free(struct emu_process *proc)
{
	while (proc->events) {
		struct emu_event *ev = proc->events;

		proc->events = ev->next;
		free(ev);
	}
	proc->nr_events = 0;
	pthread_cond_broadcast(&emu_state_changed);
}
