/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The out-of-band TCP connection of the guest's test programs
 * (rdma-verify.c, atomic-count.c): like rdma-core's pingpongs, the client
 * connects to the server's PORT and the two exchange their QP attributes
 * and synchronise over it.  The including program defines die() (print
 * and exit) first.
 */
#ifndef FERROCE_OOB_TCP_H
#define FERROCE_OOB_TCP_H

#include <netdb.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * Connects to SERVER:PORT, or with SERVER NULL accepts one connection on
 * PORT.  Returns the connected socket; dies on any failure.
 */
static int oob_connect(const char *server, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
	char service[16];
	int one = 1;
	int s;

	snprintf(service, sizeof(service), "%d", port);
	if (server) {
		if (getaddrinfo(server, service, &hints, &res))
			die("cannot resolve %s\n", server);
		s = socket(res->ai_family, res->ai_socktype, 0);
		if (s < 0 || connect(s, res->ai_addr, res->ai_addrlen))
			die("cannot connect to %s:%d\n", server, port);
	} else {
		int l;

		hints.ai_flags = AI_PASSIVE;
		if (getaddrinfo(NULL, service, &hints, &res))
			die("getaddrinfo failed\n");
		l = socket(res->ai_family, res->ai_socktype, 0);
		if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
		    bind(l, res->ai_addr, res->ai_addrlen) || listen(l, 1))
			die("cannot listen on port %d\n", port);
		s = accept(l, NULL, NULL);
		close(l);
		if (s < 0)
			die("accept failed\n");
	}
	freeaddrinfo(res);
	return s;
}

#endif /* FERROCE_OOB_TCP_H */
