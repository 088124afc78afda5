/*
 * The parallel path: criu's BO worker fills every GPU task's VRAM/GTT BOs while the tasks
 * rebuild their host memory. Any number of tasks (a launcher and its workers): each task
 * sends one command (its BOs' dma-bufs, amdgpu_socket_utils.h) and goes on at once; an
 * acceptor thread takes the commands as they come, checks each against the task's image
 * and queues its BOs on the lane of the GPU they are on; one filler thread per GPU (its
 * copy engine) works through its lane. RESUME_DEVICES_LATE(pid) waits for that task's
 * BOs and returns the first error among them; the restore then fails as a whole, and
 * exit(RESTORE) stops everything still queued or running.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LOG_PREFIX "amdgpu: "
#include "criu-plugin.h"
#include "amdgpu_image.h"
#include "amdgpu_plugin.h"
#include "amdgpu_socket_utils.h"
#include "amdgpu_test_hooks.h"

/* A task whose command arrived: its BOs still queued or running, and how they went. */
struct task_record {
	struct task_record *next;
	uint32_t pid;
	const struct amdgpu_dumped_kfd *dumped;
	int pages_fd;
	size_t pending;
	size_t nr_bos;	/* BOs with contents it sent */
	uint64_t bytes; /* their contents */
	size_t nr_gpus; /* lanes its BOs went to */
	int status;
	double start;
};

/* One BO to fill: which task's, which entry of its image, through which dma-buf. */
struct fill_job {
	struct fill_job *next;
	struct task_record *task;
	uint32_t bo_index;
	int fd;
};

/* One GPU's queue of BOs and the thread with its copy engine that works through it. */
struct lane {
	const struct amdgpu_gpu_map *gpu;
	struct fill_job *head, *tail;
	pthread_t thread;
	bool started;
};

static struct {
	int listen_sk;
	int store_id;
	int abort_efd; /* exit() on a failed restore: drop everything now */
	int stop_efd;  /* exit(): the acceptor stops waiting for connections */
	pthread_t acceptor;
	bool acceptor_started;
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t changed;
	bool stopping;
	bool aborted;
	struct task_record *tasks;
	struct lane *lanes;
	size_t nr_lanes;
} wk = { .listen_sk = -1, .store_id = -1, .abort_efd = -1, .stop_efd = -1,
	 .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };

/* ================== in the task: hand the BOs over ================== */

static int connect_to_worker(void)
{
	struct timeval send_timeout = { .tv_sec = AMDGPU_WORKER_TIMEOUT_MS / 1000 };
	struct sockaddr_un addr;
	socklen_t len = sizeof(addr);
	int listen_sk, sk, ret = 0;

	listen_sk = fdstore_get(wk.store_id);
	if (listen_sk < 0) {
		pr_err("cannot get criu's BO worker socket from fdstore: %s\n", strerror(-listen_sk));
		return listen_sk;
	}
	if (getsockname(listen_sk, (struct sockaddr *)&addr, &len))
		ret = -errno;
	close(listen_sk);
	sk = ret ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!ret && sk < 0)
		ret = -errno;
	/* A worker that stopped reading must not freeze the task for ever. */
	if (!ret && (setsockopt(sk, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout)) ||
		     connect(sk, (struct sockaddr *)&addr, len)))
		ret = -errno;
	if (ret) {
		pr_err("cannot connect to criu's BO worker: %s\n", strerror(-ret));
		if (sk >= 0)
			close(sk);
		return ret;
	}
	return sk;
}

static void build_command(int file_id, const AmdgpuKfdEntry *kfd,
			  const struct kfd_criu_bo_bucket *buckets, struct amdgpu_cmd_hdr *hdr,
			  struct amdgpu_cmd_bo *cmd_bos, int *fds)
{
	size_t i, j;

	*hdr = (struct amdgpu_cmd_hdr){ .magic = AMDGPU_CMD_MAGIC, .version = AMDGPU_CMD_VERSION,
					.type = AMDGPU_CMD_RESTORE_BOS, .pid = getpid(),
					.file_id = file_id };
	for (i = 0; i < kfd->n_bos; i++) {
		const AmdgpuBoEntry *bo = kfd->bos[i];
		struct amdgpu_cmd_bo *cmd = &cmd_bos[hdr->nr_bos];

		/* A BO without stored contents stays as RESTORE left it (zeroed). */
		if (!bo->n_extents)
			continue;
		*cmd = (struct amdgpu_cmd_bo){.bo_index = i,
					      .gpu_id = bo->gpu_id,
					      .size = bo->size,
					      .image_offset = bo->extents[0]->image_offset};
		for (j = 0; j < bo->n_extents; j++)
			cmd->data_bytes += bo->extents[j]->length;
		fds[hdr->nr_bos++] = (int)buckets[i].dmabuf_fd;
	}
	hdr->payload_size = (uint64_t)hdr->nr_bos * sizeof(*cmd_bos);
}

/* The task does not wait for the fill: its result comes at RESUME_DEVICES_LATE. */
int amdgpu_worker_send(int file_id, const AmdgpuKfdEntry *kfd,
		       const struct kfd_criu_bo_bucket *buckets)
{
	struct amdgpu_cmd_bo *cmd_bos = calloc(kfd->n_bos + 1, sizeof(*cmd_bos));
	int *fds = calloc(kfd->n_bos + 1, sizeof(*fds));
	struct amdgpu_cmd_hdr hdr;
	int sk, ret;

	ret = cmd_bos && fds ? 0 : -ENOMEM;
	if (ret)
		pr_err("out of memory\n");
	sk = ret ? ret : connect_to_worker();
	if (sk < 0)
		ret = sk;
	if (!ret) {
		build_command(file_id, kfd, buckets, &hdr, cmd_bos, fds);
		if (amdgpu_test_fault("task-dies-mid-command", getpid())) {
			pr_warn("test fault: task %d dies after its command's header\n", getpid());
			amdgpu_sk_send_all(sk, &hdr, sizeof(hdr));
			kill(getpid(), SIGKILL);
		}
		ret = amdgpu_cmd_send(sk, &hdr, cmd_bos, fds);
	}
	if (!ret)
		pr_info("task %d: %u BOs handed to criu's worker\n", getpid(), hdr.nr_bos);
	if (sk >= 0)
		close(sk);
	free(cmd_bos);
	free(fds);
	return ret;
}

/* ================== in criu: the worker ================== */

/* The command must describe the image's BOs, or the worker would write the wrong memory. */
static int check_cmd_bo(const struct amdgpu_cmd_hdr *hdr, const AmdgpuKfdEntry *kfd,
			const struct amdgpu_cmd_bo *cmd)
{
	const AmdgpuBoEntry *bo = cmd->bo_index < kfd->n_bos ? kfd->bos[cmd->bo_index] : NULL;

	if (bo && bo->size == cmd->size && bo->gpu_id == cmd->gpu_id && bo->n_extents &&
	    bo->extents[0]->image_offset == cmd->image_offset)
		return 0;
	pr_err("worker: task %u: the command's BO %u (%" PRIu64 " bytes, GPU %#x) does not match amdgpu-kfd-%u.img\n",
	       hdr->pid, cmd->bo_index, cmd->size, cmd->gpu_id, hdr->file_id);
	return -EPROTO;
}

static struct task_record *find_task(uint32_t pid)
{
	struct task_record *task;

	for (task = wk.tasks; task; task = task->next)
		if (task->pid == pid)
			return task;
	return NULL;
}

/* A record for the task, failed or with its jobs to come; under wk.lock. */
static struct task_record *add_task(uint32_t pid, int status)
{
	struct task_record *task = calloc(1, sizeof(*task));

	if (!task) {
		pr_err("worker: out of memory for task %u\n", pid);
		return NULL;
	}
	*task = (struct task_record){ .next = wk.tasks, .pid = pid, .status = status,
				      .pages_fd = -1, .start = amdgpu_now() };
	wk.tasks = task;
	pthread_cond_broadcast(&wk.changed);
	return task;
}

static void record_failure(uint32_t pid, int status)
{
	struct task_record *task;

	pthread_mutex_lock(&wk.lock);
	task = find_task(pid);
	if (task) {
		if (!task->status)
			task->status = status;
	} else {
		add_task(pid, status);
	}
	pthread_cond_broadcast(&wk.changed);
	pthread_mutex_unlock(&wk.lock);
}

/* Which task's image the command names: its own, and not one served already. */
static int check_cmd_task(const struct amdgpu_cmd_hdr *hdr, uint32_t peer_pid,
			  const struct amdgpu_dumped_kfd **dumped)
{
	if (hdr->pid != peer_pid) {
		pr_err("worker: task %u sent a command for pid %u\n", peer_pid, hdr->pid);
		return -EPROTO;
	}
	*dumped = amdgpu_find_kfd(hdr->file_id);
	if (!*dumped || (*dumped)->kfd->pid != hdr->pid) {
		pr_err("worker: task %u names file %u, which is no /dev/kfd of its own\n", hdr->pid,
		       hdr->file_id);
		return -EPROTO;
	}
	if (find_task(hdr->pid)) {
		pr_err("worker: task %u sent a second command\n", hdr->pid);
		return -EPROTO;
	}
	return 0;
}

static struct lane *lane_of(const struct amdgpu_gpu_map *gpu)
{
	size_t i;

	for (i = 0; i < wk.nr_lanes; i++)
		if (wk.lanes[i].gpu == gpu)
			return &wk.lanes[i];
	return NULL;
}

/* Every BO onto the lane of its GPU; the fds go with the jobs. Under wk.lock. */
static int queue_jobs(struct task_record *task, const struct amdgpu_cmd_bo *bos, int *fds,
		      uint32_t nr_bos)
{
	bool used[64] = {};
	uint32_t i;

	for (i = 0; i < nr_bos; i++) {
		const struct amdgpu_gpu_map *gpu =
			amdgpu_map_user_gpu(task->dumped->kfd, bos[i].gpu_id);
		struct lane *lane = gpu ? lane_of(gpu) : NULL;
		struct fill_job *job = lane ? calloc(1, sizeof(*job)) : NULL;

		if (!job) {
			pr_err("worker: task %u: cannot queue BO %u\n", task->pid, bos[i].bo_index);
			return gpu && lane ? -ENOMEM : -ENODEV;
		}
		*job = (struct fill_job){ .task = task, .bo_index = bos[i].bo_index, .fd = fds[i] };
		fds[i] = -1;
		if (lane->tail)
			lane->tail->next = job;
		else
			lane->head = job;
		lane->tail = job;
		task->pending++;
		task->nr_bos++;
		task->bytes += bos[i].data_bytes;
		if (!used[lane - wk.lanes]) {
			used[lane - wk.lanes] = true;
			task->nr_gpus++;
		}
	}
	pthread_cond_broadcast(&wk.changed);
	return 0;
}

static int open_pages(const struct amdgpu_dumped_kfd *dumped, int *pages_fd)
{
	int ret;

	*pages_fd = amdgpu_pages_open(dumped->file_id);
	if (*pages_fd < 0)
		return *pages_fd;
	ret = amdgpu_pages_check_size(*pages_fd, dumped->file_id, dumped->kfd);
	if (ret) {
		close(*pages_fd);
		*pages_fd = -1;
	}
	return ret;
}

/* A command received whole: checked, then its BOs queued (or the task marked failed). */
static void take_command(const struct amdgpu_cmd_hdr *hdr, uint32_t peer_pid,
			 const struct amdgpu_cmd_bo *bos, int *fds)
{
	const struct amdgpu_dumped_kfd *dumped = NULL;
	struct task_record *task;
	int ret, pages_fd = -1;
	uint32_t i;

	pthread_mutex_lock(&wk.lock);
	ret = check_cmd_task(hdr, peer_pid, &dumped);
	pthread_mutex_unlock(&wk.lock);
	for (i = 0; !ret && i < hdr->nr_bos; i++)
		ret = check_cmd_bo(hdr, dumped->kfd, &bos[i]);
	if (!ret)
		ret = open_pages(dumped, &pages_fd);
	if (ret) {
		record_failure(peer_pid, ret);
		return;
	}
	pthread_mutex_lock(&wk.lock);
	task = add_task(hdr->pid, 0);
	if (task) {
		task->dumped = dumped;
		task->pages_fd = pages_fd;
		ret = queue_jobs(task, bos, fds, hdr->nr_bos);
		if (ret)
			task->status = ret;
	} else if (pages_fd >= 0) {
		close(pages_fd);
	}
	pthread_mutex_unlock(&wk.lock);
}

static const char *recv_error_text(int err)
{
	switch (err) {
	case -ECONNRESET:
		return "the task closed the connection mid-command (did it die?)";
	case -ETIMEDOUT:
		return "the task sent nothing more for too long";
	case -ECANCELED:
		return "the restore was aborted";
	case -EPROTO:
		return "malformed command";
	case -EPROTONOSUPPORT:
		return "unknown protocol version";
	default:
		return strerror(-err);
	}
}

static void serve_connection(int sk)
{
	struct amdgpu_cmd_hdr hdr = { 0 };
	struct amdgpu_cmd_bo *bos;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int *fds, ret;
	uint32_t i;

	/* The peer's pid from the kernel: a broken command still fails the right task. */
	if (getsockopt(sk, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		cred.pid = 0;
	ret = amdgpu_cmd_recv(sk, &hdr, &bos, &fds, wk.abort_efd, AMDGPU_WORKER_TIMEOUT_MS);
	if (ret) {
		/* Once the restore is aborted, whatever failed it has been reported already. */
		if (ret == -ECANCELED)
			pr_warn("worker: restore aborted; BO command of task %d broken off\n", cred.pid);
		else
			pr_err("worker: BO command of task %d broken off: %s\n", cred.pid,
			       recv_error_text(ret));
		record_failure(cred.pid, ret);
		return;
	}
	take_command(&hdr, cred.pid, bos, fds);
	for (i = 0; i < hdr.nr_bos; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(bos);
	free(fds);
}

/*
 * Takes the tasks' commands as they come, until the restore ends. A connection already
 * queued is served even once aborting: a task that died mid-command is still named.
 */
static void *acceptor_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd pfds[2] = { { .fd = wk.listen_sk, .events = POLLIN },
					  { .fd = wk.stop_efd, .events = POLLIN } };
		int sk;

		if (poll(pfds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			pr_perror("worker: poll");
			break;
		}
		if (!pfds[0].revents)
			break;
		sk = accept4(wk.listen_sk, NULL, NULL, SOCK_CLOEXEC);
		if (sk < 0) {
			pr_perror("worker: accept");
			continue;
		}
		serve_connection(sk);
		close(sk);
	}
	return NULL;
}

/* A job done: the task learns its first error, and when its last BO is in. Under wk.lock. */
static void job_done(struct fill_job *job, int ret)
{
	struct task_record *task = job->task;

	if (ret && !task->status)
		task->status = ret;
	close(job->fd);
	free(job);
	if (--task->pending)
		return;
	if (!task->status)
		pr_info("worker: task %u: %zu BOs (%" PRIu64
			" bytes) filled on %zu GPUs in %.3f s\n",
			task->pid, task->nr_bos, task->bytes, task->nr_gpus,
			amdgpu_now() - task->start);
	close(task->pages_fd);
	task->pages_fd = -1;
	pthread_cond_broadcast(&wk.changed);
}

static int fill_job(const struct amdgpu_dev_ops *ops, struct amdgpu_engine *engine,
		    const struct fill_job *job)
{
	const AmdgpuKfdEntry *kfd = job->task->dumped->kfd;

	if (amdgpu_test_fault("worker-error", 0)) {
		pr_err("worker: task %u: test fault worker-error: its BOs are not filled\n",
		       job->task->pid);
		return -EIO;
	}
	return amdgpu_fill_bo(ops, engine, kfd->bos[job->bo_index], job->fd, job->task->pages_fd);
}

/* One GPU's filler: its copy engine opened at the first job, its lane worked through. */
static void *lane_main(void *arg)
{
	struct lane *lane = arg;
	struct amdgpu_engine *engine = NULL;
	const struct amdgpu_dev_ops *ops = amdgpu_rst.ops;
	int engine_ret = 0;

	pthread_mutex_lock(&wk.lock);
	for (;;) {
		struct fill_job *job = lane->head;
		bool skip;
		int ret;

		if (wk.aborted || (!job && wk.stopping))
			break;
		if (!job) {
			pthread_cond_wait(&wk.changed, &wk.lock);
			continue;
		}
		lane->head = job->next;
		if (!lane->head)
			lane->tail = NULL;
		/* A task that failed already gets nothing more written. */
		skip = job->task->status != 0;
		pthread_mutex_unlock(&wk.lock);
		if (!skip && !engine && !engine_ret)
			engine_ret = ops->engine_open(lane->gpu->local_minor, &engine);
		ret = skip ? 0 : engine_ret ? engine_ret : fill_job(ops, engine, job);
		pthread_mutex_lock(&wk.lock);
		job_done(job, ret);
	}
	pthread_mutex_unlock(&wk.lock);
	if (engine)
		ops->engine_close(engine);
	return NULL;
}

/* ---- lifecycle, in criu ---- */

/* A listening socket with an autobound abstract name: tasks find it by getsockname(). */
int amdgpu_worker_listen(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };

	wk.listen_sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (wk.listen_sk < 0 || bind(wk.listen_sk, (struct sockaddr *)&addr, sizeof(sa_family_t)) ||
	    listen(wk.listen_sk, 128)) {
		pr_perror("cannot create the BO worker's socket");
		return -errno;
	}
	wk.abort_efd = eventfd(0, EFD_CLOEXEC);
	wk.stop_efd = eventfd(0, EFD_CLOEXEC);
	if (wk.abort_efd < 0 || wk.stop_efd < 0) {
		pr_perror("eventfd");
		return -errno;
	}
	/* Before the fork: fdstore is how the tasks reach it. */
	wk.store_id = fdstore_add(wk.listen_sk);
	if (wk.store_id < 0) {
		pr_err("cannot park the BO worker's socket in fdstore: %s\n", strerror(-wk.store_id));
		return wk.store_id;
	}
	return 0;
}

static int start_thread(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int ret;

	/* criu's waitpid() gets SIGCHLD; the worker threads must never take it. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		pr_err("cannot start a BO worker thread: %s\n", strerror(ret));
	return -ret;
}

/* One lane per GPU here, then the acceptor: the tasks are restoring already. */
int amdgpu_worker_start(void)
{
	size_t i;
	int ret;

	wk.lanes = calloc(amdgpu_rst.nr_gpus + 1, sizeof(*wk.lanes));
	if (!wk.lanes) {
		pr_err("out of memory\n");
		return -ENOMEM;
	}
	for (i = 0; i < amdgpu_rst.nr_gpus; i++) {
		wk.lanes[i].gpu = &amdgpu_rst.gpus[i];
		ret = start_thread(&wk.lanes[i].thread, lane_main, &wk.lanes[i]);
		if (ret)
			return ret;
		wk.lanes[i].started = true;
		wk.nr_lanes++;
	}
	ret = start_thread(&wk.acceptor, acceptor_main, NULL);
	if (ret)
		return ret;
	wk.acceptor_started = true;
	pr_info("BO worker started: %zu GPU lanes; contents are restored in parallel with host memory\n",
		wk.nr_lanes);
	return 0;
}

/* The join point of one task: its BOs are all in, or the first error among them. */
int amdgpu_worker_result(uint32_t pid)
{
	struct timespec until;
	struct task_record *task;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += AMDGPU_WORKER_TIMEOUT_MS / 1000;
	pthread_mutex_lock(&wk.lock);
	for (;;) {
		task = find_task(pid);
		if (task && (task->status || !task->pending))
			break;
		if (wk.aborted || ret == ETIMEDOUT)
			break;
		/* Filling goes on as long as it takes; only a command that never came times out. */
		if (task)
			pthread_cond_wait(&wk.changed, &wk.lock);
		else
			ret = pthread_cond_timedwait(&wk.changed, &wk.lock, &until);
	}
	if (!task)
		pr_err("task %u: criu's BO worker never got the task's BO restore command\n", pid);
	ret = task ? task->status : -EPROTO;
	pthread_mutex_unlock(&wk.lock);
	/* A failure was logged where it happened, naming the task and the cause. */
	return ret;
}

static void free_lane_jobs(struct lane *lane)
{
	while (lane->head) {
		struct fill_job *job = lane->head;

		lane->head = job->next;
		close(job->fd);
		free(job);
	}
	lane->tail = NULL;
}

void amdgpu_worker_stop(bool abort)
{
	uint64_t one = 1;
	size_t i;

	pthread_mutex_lock(&wk.lock);
	wk.stopping = true;
	wk.aborted = abort;
	pthread_cond_broadcast(&wk.changed);
	pthread_mutex_unlock(&wk.lock);
	if (abort && wk.abort_efd >= 0 && write(wk.abort_efd, &one, sizeof(one)) != sizeof(one))
		pr_perror("cannot signal the BO worker");
	if (wk.stop_efd >= 0 && write(wk.stop_efd, &one, sizeof(one)) != sizeof(one))
		pr_perror("cannot stop the BO worker's acceptor");
	if (wk.acceptor_started)
		pthread_join(wk.acceptor, NULL);
	for (i = 0; i < wk.nr_lanes; i++)
		pthread_join(wk.lanes[i].thread, NULL);
	for (i = 0; i < wk.nr_lanes; i++)
		free_lane_jobs(&wk.lanes[i]);
	while (wk.tasks) {
		struct task_record *task = wk.tasks;

		wk.tasks = task->next;
		if (task->pages_fd >= 0)
			close(task->pages_fd);
		free(task);
	}
	free(wk.lanes);
	if (wk.listen_sk >= 0)
		close(wk.listen_sk);
	if (wk.abort_efd >= 0)
		close(wk.abort_efd);
	if (wk.stop_efd >= 0)
		close(wk.stop_efd);
	wk.lanes = NULL;
	wk.nr_lanes = 0;
	wk.listen_sk = wk.abort_efd = wk.stop_efd = wk.store_id = -1;
	wk.acceptor_started = wk.stopping = wk.aborted = false;
}
