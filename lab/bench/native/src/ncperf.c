/* ncperf: the benchmarks' native request/response and connection-rate
 * generator (a Go generator costs about a third of this machine's
 * connection rate, so rate and latency figures come from here).
 *
 *   ncperf serve PORT                 echo server: one connection at a
 *                                     time, answers each 1-byte request
 *   ncperf rr HOST PORT SECONDS       one connection, 1-byte request and
 *                                     answer in a loop: rate, latency
 *   ncperf crr HOST PORT SECONDS      connect, request, answer, close in a
 *                                     loop: connections per second
 *
 * Results are one JSON line on stdout: {"ops":N,"per_sec":R,"p50_us":...,
 * "p90_us":...,"p99_us":...,"p999_us":...,"max_us":...,"mean_us":...,
 * "stddev_us":...,"errors":E}.
 * Latencies are kept for every operation (no sampling); at most
 * MAX_SAMPLES, beyond which only the counts, the maximum, the mean and
 * the standard deviation grow (those cover every operation).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES (8u << 20)

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int resolve(const char *host, const char *port, struct sockaddr_storage *sa, socklen_t *len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *res;
	int rc = getaddrinfo(host, port, &hints, &res);

	if (rc) {
		fprintf(stderr, "ncperf: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	memcpy(sa, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int serve(const char *port)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(atoi(port))};
	int one = 1, zero = 0, l = socket(AF_INET6, SOCK_STREAM, 0);
	char c;

	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)); /* IPv4 too */
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1024)) {
		perror("ncperf: listen");
		return 1;
	}
	for (;;) {
		int fd = accept(l, NULL, NULL);

		if (fd < 0)
			continue;
		nodelay(fd);
		while (read(fd, &c, 1) == 1)
			if (write(fd, &c, 1) != 1)
				break;
		close(fd);
	}
}

static int cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

static double pct(float *s, unsigned n, double p)
{
	if (!n)
		return 0;
	return s[(unsigned)(p * (n - 1))];
}

/* one request and its answer on fd */
static int exchange(int fd)
{
	char c = 'x';

	return write(fd, &c, 1) == 1 && read(fd, &c, 1) == 1 ? 0 : -1;
}

/* dial opens a socket from src (NULL: the kernel's choice) and connects
 * it to sa. */
static int dial(const struct sockaddr_storage *sa, socklen_t len, const struct sockaddr_storage *src, socklen_t srclen)
{
	int fd = socket(sa->ss_family, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	/* The port is chosen at connect, for this destination: bound at
	 * bind, every port would be reserved for any destination, and the
	 * connections in TIME_WAIT would soon hold them all. */
	if (src && setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)))
		perror("ncperf: IP_BIND_ADDRESS_NO_PORT");
	if ((src && bind(fd, (const struct sockaddr *)src, srclen)) || connect(fd, (const struct sockaddr *)sa, len)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int run(const char *mode, const char *host, const char *port, double seconds, const char *source)
{
	struct sockaddr_storage sa, src;
	socklen_t len, srclen = 0;
	float *samples = malloc(MAX_SAMPLES * sizeof(float));
	unsigned n = 0;
	unsigned long ops = 0, errors = 0;
	double start, end, t0, t1, max = 0;
	double mean = 0, m2 = 0; /* Welford's running mean and sum of squared deviations */
	int crr = !strcmp(mode, "crr"), fd = -1;

	if (!samples || resolve(host, port, &sa, &len) || (source && resolve(source, "0", &src, &srclen)))
		return 2;
	if (!crr) {
		fd = dial(&sa, len, source ? &src : NULL, srclen);
		if (fd < 0) {
			perror("ncperf: connect");
			return 1;
		}
		nodelay(fd);
	}
	start = now_us();
	end = start + seconds * 1e6;
	for (t0 = start; t0 < end; t0 = t1) {
		int bad;

		if (crr) {
			fd = dial(&sa, len, source ? &src : NULL, srclen);
			bad = fd < 0 || exchange(fd);
			if (fd >= 0)
				close(fd);
		} else {
			bad = exchange(fd);
		}
		t1 = now_us();
		if (bad) {
			errors++;
			if (!crr)
				break;
			continue;
		}
		ops++;
		if (n < MAX_SAMPLES)
			samples[n++] = t1 - t0;
		if (t1 - t0 > max)
			max = t1 - t0;
		{
			double d = (t1 - t0) - mean;

			mean += d / ops;
			m2 += d * ((t1 - t0) - mean);
		}
	}
	qsort(samples, n, sizeof(float), cmp);
	printf("{\"ops\":%lu,\"per_sec\":%.1f,\"p50_us\":%.2f,\"p90_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.2f,"
	       "\"mean_us\":%.2f,\"stddev_us\":%.2f,\"errors\":%lu}\n",
	       ops, ops / ((t0 - start) / 1e6), pct(samples, n, 0.50), pct(samples, n, 0.90), pct(samples, n, 0.99),
	       pct(samples, n, 0.999), max, mean, ops > 1 ? sqrt(m2 / (ops - 1)) : 0, errors);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && !strcmp(argv[1], "serve"))
		return serve(argv[2]);
	if ((argc == 5 || argc == 6) && (!strcmp(argv[1], "rr") || !strcmp(argv[1], "crr")))
		return run(argv[1], argv[2], argv[3], atof(argv[4]), argc == 6 ? argv[5] : NULL);
	fprintf(stderr, "usage: ncperf serve PORT | ncperf rr|crr HOST PORT SECONDS [SOURCE]\n");
	return 2;
}
