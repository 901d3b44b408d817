-- The team's migration: the order projection and the e-mails sent.
CREATE TABLE orders (
    id      text PRIMARY KEY,
    status  text NOT NULL,
    version integer NOT NULL
);
CREATE TABLE order_emails (
    id       bigserial PRIMARY KEY,
    event_id text NOT NULL,
    order_id text NOT NULL,
    status   text NOT NULL
);
