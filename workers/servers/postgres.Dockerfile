# PostgreSQL for compose.yaml where no registry serves postgres:16: Debian's PostgreSQL 15 on
# the local base tree (scripts/build-images.sh), taking the same settings as that image
# (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, data in /var/lib/postgresql/data).
ARG BASE_IMAGE=evalq-postgres-base:local
FROM ${BASE_IMAGE}
COPY workers/servers/postgres-entrypoint.sh /usr/local/bin/evalq-postgres
RUN chmod 0755 /usr/local/bin/evalq-postgres \
    && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data
USER postgres
EXPOSE 5432
ENTRYPOINT ["evalq-postgres"]
