"""Drives Helm (through helm-sdkpy, Helm's Go library behind Python bindings) for tests/helm_chart.rs.

usage: helm_chart.py lint CHART
       helm_chart.py cycle CHART KUBECONFIG NAMESPACE RELEASE VALUES_JSON

`lint` prints one JSON line. `cycle` installs, lists and prints one JSON line,
then waits for a line on stdin (the caller inspects the cluster meanwhile),
uninstalls, lists and prints a second JSON line. One process does both, because
the release is kept in Helm's memory driver (HELM_DRIVER=memory, set by the caller).
Exits 1 with the error on stderr when Helm fails.
"""

import asyncio
import json
import sys

import helm_sdkpy


async def lint(chart: str) -> dict:
    config = helm_sdkpy.Configuration(namespace="default")
    result = await helm_sdkpy.Lint(config).run(chart)
    # helm-sdkpy 0.1.32 marshals Go errors as {}: only severity and path survive.
    return {
        "messages": [
            {"severity": message.get("Severity"), "path": message.get("Path")}
            for message in result.get("Messages") or []
        ],
        "errors": len(result.get("Errors") or []),
    }


async def install(config, chart: str, release: str, values: dict) -> dict:
    installed = await helm_sdkpy.Install(config).run(
        release_name=release,
        chart_path=chart,
        values=values,
        create_namespace=True,
        # Nothing runs pods here: waiting for the Deployment would never end.
        wait=False,
        timeout=120,
    )
    releases = await helm_sdkpy.List(config).run(all=True)
    return {
        "release": {key: installed.get(key) for key in ("name", "namespace", "version")},
        "status": (installed.get("info") or {}).get("status"),
        "manifest": installed.get("manifest", ""),
        "listed": sorted(release.get("name", "") for release in releases or []),
    }


async def uninstall(config, release: str) -> dict:
    await helm_sdkpy.Uninstall(config).run(release, wait=False, timeout=120)
    releases = await helm_sdkpy.List(config).run(all=True)
    return {"listed": sorted(release.get("name", "") for release in releases or [])}


async def cycle(chart: str, kubeconfig: str, namespace: str, release: str, values: str) -> None:
    # One configuration for both steps: the memory driver's releases live in it.
    config = helm_sdkpy.Configuration(namespace=namespace, kubeconfig=kubeconfig)
    print(json.dumps(await install(config, chart, release, json.loads(values))), flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    print(json.dumps(await uninstall(config, release)), flush=True)


def main(argv: list) -> int:
    command, args = argv[1], argv[2:]
    try:
        if command == "lint":
            print(json.dumps(asyncio.run(lint(*args))), flush=True)
        elif command == "cycle":
            asyncio.run(cycle(*args))
        else:
            print(f"unknown command {command!r}", file=sys.stderr)
            return 2
    except helm_sdkpy.HelmError as error:
        print(f"helm {command} failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
