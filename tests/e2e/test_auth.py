"""Users, roles and TLS against a real server: SCRAM with real user:password@ URIs."""
import os
import subprocess

import pymongo
import pytest
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError

from conftest import Server, serve_argv


def uri(server, user, pwd, **opts):
    q = "&".join(f"{k}={v}" for k, v in {"authSource": "admin", **opts}.items())
    return f"mongodb://{user}:{pwd}@127.0.0.1:{server.port}/?{q}"


@pytest.fixture
def auth_server(dbpath):
    s = Server(dbpath, ["--auth"]).start()
    # The localhost exception: the first user, over loopback, without credentials.
    c = s.client()
    c.admin.command("createUser", "boss", pwd="s3cret", roles=["root"])
    c.close()
    yield s
    s.stop()


def test_scram_sha256_and_sha1_with_a_password_uri(auth_server):
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1", None):
        opts = {"authMechanism": mech} if mech else {}
        c = pymongo.MongoClient(uri(auth_server, "boss", "s3cret", **opts), serverSelectionTimeoutMS=10000)
        c.app.things.insert_one({"by": mech})
        assert c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"] == [{"user": "boss", "db": "admin"}]
        c.close()
    c = pymongo.MongoClient(uri(auth_server, "boss", "s3cret"), serverSelectionTimeoutMS=10000)
    assert c.app.things.count_documents({}) == 3
    c.close()


def test_wrong_password_and_unknown_user_fail_with_18(auth_server):
    for user, pwd in (("boss", "wrong"), ("nobody", "s3cret")):
        c = pymongo.MongoClient(uri(auth_server, user, pwd), serverSelectionTimeoutMS=10000)
        with pytest.raises(OperationFailure) as e:
            c.admin.command("ping")
        assert e.value.code == 18
        c.close()


def test_unauthenticated_clients_are_refused_with_13(auth_server):
    c = auth_server.client()
    assert c.admin.command("ping")["ok"] == 1.0
    assert c.admin.command("hello")["isWritablePrimary"] is True
    for fn in (lambda: c.app.things.find_one(), lambda: c.app.things.insert_one({}), lambda: c.list_database_names()):
        with pytest.raises(OperationFailure) as e:
            fn()
        assert e.value.code == 13
    # The localhost exception closed with the first user.
    with pytest.raises(OperationFailure) as e:
        c.admin.command("createUser", "sneaky", pwd="x", roles=["root"])
    assert e.value.code == 13
    c.close()


def test_roles_users_and_stored_credentials(auth_server):
    admin = pymongo.MongoClient(uri(auth_server, "boss", "s3cret"), serverSelectionTimeoutMS=10000)
    admin.app.command("createUser", "reader", pwd="r", roles=["read"])
    admin.app.command("createUser", "writer", pwd="w", roles=[{"role": "readWrite", "db": "app"}])
    admin.admin.command("createUser", "watcher", pwd="m", roles=["clusterMonitor"])
    admin.app.things.insert_one({"x": 1})
    info = admin.app.command("usersInfo", "reader", showCredentials=True)["users"][0]
    assert info["user"] == "reader" and info["roles"] == [{"role": "read", "db": "app"}]
    creds = info["credentials"]
    assert set(creds) == {"SCRAM-SHA-1", "SCRAM-SHA-256"}
    assert set(creds["SCRAM-SHA-256"]) == {"iterationCount", "salt", "storedKey", "serverKey"}
    assert "r" not in str(creds.values()).split("'")  # no password anywhere
    reader = pymongo.MongoClient(uri(auth_server, "reader", "r", authSource="app"), serverSelectionTimeoutMS=10000)
    assert reader.app.things.find_one()["x"] == 1
    with pytest.raises(OperationFailure) as e:
        reader.app.things.insert_one({"x": 2})
    assert e.value.code == 13
    with pytest.raises(OperationFailure) as e:
        reader.other.things.find_one()
    assert e.value.code == 13
    writer = pymongo.MongoClient(uri(auth_server, "writer", "w", authSource="app"), serverSelectionTimeoutMS=10000)
    writer.app.things.insert_one({"x": 2})
    watcher = pymongo.MongoClient(uri(auth_server, "watcher", "m"), serverSelectionTimeoutMS=10000)
    assert watcher.admin.command("serverStatus")["ok"] == 1.0
    with pytest.raises(OperationFailure) as e:
        watcher.app.things.find_one()
    assert e.value.code == 13
    admin.app.command("grantRolesToUser", "reader", roles=["readWrite"])
    reader2 = pymongo.MongoClient(uri(auth_server, "reader", "r", authSource="app"), serverSelectionTimeoutMS=10000)
    reader2.app.things.insert_one({"x": 3})
    admin.app.command("revokeRolesFromUser", "reader", roles=["readWrite"])
    admin.app.command("updateUser", "reader", pwd="r2")
    bad = pymongo.MongoClient(uri(auth_server, "reader", "r", authSource="app"), serverSelectionTimeoutMS=10000)
    with pytest.raises(OperationFailure):
        bad.app.things.find_one()
    admin.app.command("dropUser", "writer")
    with pytest.raises(OperationFailure) as e:
        admin.app.command("dropUser", "writer")
    assert e.value.code == 11
    for c in (admin, reader, writer, watcher, reader2, bad):
        c.close()


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path):
    d = str(tmp_path)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=flashdoc test CA", cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"), ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}", cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
        with open(os.path.join(d, f"{name}.pem"), "w") as out:
            out.write(open(os.path.join(d, f"{name}.crt")).read() + open(os.path.join(d, f"{name}.key")).read())
    return d


def tls_server(dbpath, pki, mode, extra=""):
    cfg = os.path.join(pki, f"{mode}.yaml")
    with open(cfg, "w") as f:
        f.write(f"net:\n  tls:\n    mode: {mode}\n    certificateKeyFile: {pki}/server.pem\n{extra}")
    return Server(dbpath, ["--config", cfg]).start()


def test_tls_with_a_self_signed_ca(dbpath, pki):
    s = tls_server(dbpath, pki, "requireTLS",
                   f"    CAFile: {pki}/ca.pem\n    allowConnectionsWithoutCertificates: true\n")
    try:
        c = pymongo.MongoClient("127.0.0.1", s.port, tls=True, tlsCAFile=f"{pki}/ca.pem", serverSelectionTimeoutMS=10000)
        c.t.c.insert_one({"secure": True})
        assert c.t.c.find_one()["secure"] is True
        c.close()
        with_cert = pymongo.MongoClient("127.0.0.1", s.port, tls=True, tlsCAFile=f"{pki}/ca.pem",
                                        tlsCertificateKeyFile=f"{pki}/client.pem", serverSelectionTimeoutMS=10000)
        assert with_cert.admin.command("ping")["ok"] == 1.0
        with_cert.close()
        plain = pymongo.MongoClient("127.0.0.1", s.port, serverSelectionTimeoutMS=2000)
        with pytest.raises(ServerSelectionTimeoutError):
            plain.admin.command("ping")
        plain.close()
        untrusted = pymongo.MongoClient("127.0.0.1", s.port, tls=True, serverSelectionTimeoutMS=2000)
        with pytest.raises(ServerSelectionTimeoutError):
            untrusted.admin.command("ping")  # the server's CA is not the system's
        untrusted.close()
    finally:
        s.stop()


def test_client_certificates_required_with_a_ca_file(dbpath, pki):
    s = tls_server(dbpath, pki, "requireTLS", f"    CAFile: {pki}/ca.pem\n")
    try:
        no_cert = pymongo.MongoClient("127.0.0.1", s.port, tls=True, tlsCAFile=f"{pki}/ca.pem", serverSelectionTimeoutMS=2000)
        with pytest.raises(ServerSelectionTimeoutError):
            no_cert.admin.command("ping")
        no_cert.close()
        ok = pymongo.MongoClient("127.0.0.1", s.port, tls=True, tlsCAFile=f"{pki}/ca.pem",
                                 tlsCertificateKeyFile=f"{pki}/client.pem", serverSelectionTimeoutMS=10000)
        assert ok.admin.command("ping")["ok"] == 1.0
        ok.close()
    finally:
        s.stop()


def test_allow_tls_serves_both(dbpath, pki):
    s = tls_server(dbpath, pki, "allowTLS")
    try:
        for kw in ({}, {"tls": True, "tlsCAFile": f"{pki}/ca.pem"}):
            c = pymongo.MongoClient("127.0.0.1", s.port, serverSelectionTimeoutMS=10000, **kw)
            assert c.admin.command("ping")["ok"] == 1.0
            c.close()
    finally:
        s.stop()


def test_non_loopback_binding_without_auth_warns(dbpath):
    s = Server(dbpath, ["--bind-ip", "0.0.0.0"])
    proc = subprocess.Popen(
        serve_argv("--dbpath", dbpath, "--port", str(s.port), "--bind-ip", "0.0.0.0"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "waiting for connections" in line:
            break
    proc.terminate()
    proc.wait(timeout=60)
    assert any("Access control is not enabled" in l for l in lines), lines


def test_out_and_merge_need_write_privileges_on_their_target(auth_server):
    # aggregate needs find; a pipeline ending in $out or $merge writes its target too, so it
    # needs insert and remove (or update) there, as in mongod.
    admin = pymongo.MongoClient(uri(auth_server, "boss", "s3cret"), serverSelectionTimeoutMS=10000)
    admin.app.command("createUser", "reader", pwd="r", roles=["read"])
    admin.app.command("createUser", "writer", pwd="w", roles=[{"role": "readWrite", "db": "app"}])
    admin.app.src.insert_many([{"_id": 1}, {"_id": 2}])
    reader = pymongo.MongoClient(uri(auth_server, "reader", "r", authSource="app"), serverSelectionTimeoutMS=10000)
    assert len(list(reader.app.src.aggregate([{"$match": {}}]))) == 2
    for stage in ({"$out": "copy"}, {"$merge": {"into": "copy"}}):
        with pytest.raises(OperationFailure) as e:
            list(reader.app.src.aggregate([stage]))
        assert e.value.code == 13
    writer = pymongo.MongoClient(uri(auth_server, "writer", "w", authSource="app"), serverSelectionTimeoutMS=10000)
    list(writer.app.src.aggregate([{"$out": "copy"}]))
    assert admin.app.copy.count_documents({}) == 2
    # readWrite on app does not reach another database.
    with pytest.raises(OperationFailure) as e:
        list(writer.app.src.aggregate([{"$merge": {"into": {"db": "other", "coll": "copy"}}}]))
    assert e.value.code == 13
    for c in (admin, reader, writer):
        c.close()
