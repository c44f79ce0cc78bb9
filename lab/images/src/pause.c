/* pause: the infrastructure container of every pod (the runtime's
 * sandbox image): it holds the pod's namespaces open and does nothing
 * else. It reaps children (it is PID 1 of a pod that shares its PID
 * namespace) and exits 0 on SIGINT or SIGTERM, as Kubernetes' own does.
 * Built static (cc -static), so its image needs nothing else.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig)
{
	(void)sig;
	_exit(0);
}

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void)
{
	struct sigaction q = {.sa_handler = quit}, r = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};

	sigaction(SIGINT, &q, NULL);
	sigaction(SIGTERM, &q, NULL);
	sigaction(SIGCHLD, &r, NULL);
	for (;;)
		pause();
	return 1;
}
