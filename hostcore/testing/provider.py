"""The conformance suite for work-item providers (see :mod:`hostcore.testing.kit`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hostcore.plugin.registration import KINDS, validate
from hostcore.testing.kit import _PluginSuite, contract_failure, registered_objects, require

# Imports inside functions here are lazy on purpose: this module loads with hostcore's
# pytest plugin in every pytest run, and only this suite's tests need the work-item modules.

# A ref no provider should claim: the kit asks ``owns`` about it.
FOREIGN_REF = "hostcore-conformance:not-yours#0"


class ProviderConformance(_PluginSuite):
    """Checks every work-item provider the plugin registers.

    Contract: ``list_items()`` returns a :class:`~hostcore.plugin.Listing` with
    one :class:`~hostcore.plugin.ScopeListing` per scope; every item of a
    complete scope is owned by the provider (``owns``) and placed in that scope
    (``scope_of``); ``closure(ref)`` of a listed item answers with a
    :class:`~hostcore.plugin.Closure`; when the backend cannot answer, the
    listing says ``failed``/``interrupted``/``degraded`` for every scope it could
    not list (never a shorter list called complete) and ``closure`` raises
    :class:`~hostcore.plugin.ProviderError` — nothing else.

    Fixtures to provide: ``plugin``; ``break_backend`` returning a callable
    ``(host) -> None`` that makes the backend unanswerable (remove the folder,
    point at a dead server); usually ``plugin_config`` and ``seed_items`` (a
    callable ``(host) -> None`` giving the provider at least one open item).
    ``foreign_ref`` defaults to a ref no provider should own.
    """

    @pytest.fixture
    def seed_items(self) -> Callable[[Any], None]:
        """Return a callable that gives the provider(s) in ``host`` open items."""
        return lambda host: None

    @pytest.fixture
    def break_backend(self) -> Callable[[Any], None]:
        contract_failure(
            f"{type(self).__name__} needs a `break_backend` fixture returning a callable "
            "(host) -> None that makes your provider's backend unanswerable, e.g.\n\n"
            "    @pytest.fixture\n    def break_backend(self):\n"
            "        return lambda host: shutil.rmtree(host.root / 'tasks')\n")

    @pytest.fixture
    def foreign_ref(self) -> str:
        return FOREIGN_REF

    @pytest.fixture
    def provider_host(self, build_host: Callable[..., Any], seed_items: Any) -> Any:
        host = build_host()
        seed_items(host)
        return host

    @pytest.fixture
    def providers(self, provider_host: Any, plugin: object) -> list[Any]:
        return registered_objects(provider_host, plugin, "provider")

    def _listing(self, provider: Any) -> Any:
        from hostcore.workitems.items import Listing, ProviderError, ScopeListing, WorkItem

        try:
            listing = provider.list_items()
        except ProviderError:
            raise
        except Exception as exc:
            contract_failure(f"provider {provider.name!r}: list_items() raised "
                             f"{type(exc).__name__}; report a scope it cannot list as failed "
                             "in the Listing (or raise hostcore.plugin.ProviderError), "
                             "never another exception.", raised=exc)
        require(isinstance(listing, Listing),
                f"provider {provider.name!r}: list_items() returned "
                f"{type(listing).__name__}; it must return hostcore.plugin.Listing("
                "scopes=(ScopeListing(scope=..., status='complete', items=(...)), ...)).")
        for scope in listing.scopes:
            require(isinstance(scope, ScopeListing),
                    f"provider {provider.name!r}: Listing.scopes holds "
                    f"{type(scope).__name__}; each entry must be a ScopeListing.")
            require(scope.status in ("complete", "failed", "interrupted", "degraded"),
                    f"provider {provider.name!r}: scope status {scope.status!r} is not one of "
                    "complete, failed, interrupted, degraded.")
            for item in scope.items:
                require(isinstance(item, WorkItem),
                        f"provider {provider.name!r}: scope {scope.scope!r} lists "
                        f"{type(item).__name__}; items must be hostcore.plugin.WorkItem.")
        names = [scope.scope for scope in listing.scopes]
        require(len(names) == len(set(names)),
                f"provider {provider.name!r}: a scope appears twice in one listing: {names}")
        return listing

    def _listed(self, provider: Any) -> list[tuple[str, Any]]:
        from hostcore.workitems.items import ProviderError

        try:
            listing = self._listing(provider)
        except ProviderError as exc:
            contract_failure(f"provider {provider.name!r}: list_items() raised ProviderError "
                             "with its backend working.", raised=exc)
        listed = [(scope.scope, item) for scope in listing.scopes
                  if scope.status == "complete" for item in scope.items]
        require(listed, f"provider {provider.name!r}: list_items() gave no item in a complete "
                        "scope, so ownership and closures cannot be checked. Give it open "
                        "items in the `seed_items` fixture (or through `plugin_config`).")
        return listed

    def test_provider_is_a_valid_registration(self, providers: list[Any]) -> None:
        for provider in providers:
            try:
                validate(KINDS["provider"], provider, "the provider")
            except Exception as exc:
                contract_failure(str(exc))

    def test_listed_items_are_owned_and_placed_in_their_scope(
            self, providers: list[Any]) -> None:
        for provider in providers:
            for scope, item in self._listed(provider):
                owned = provider.owns(item.ref)
                require(owned is True,
                        f"provider {provider.name!r}: owns({item.ref.ref!r}) returned "
                        f"{owned!r} for an item it listed; it must return True (a bool).")
                placed = provider.scope_of(item.ref)
                require(placed == scope,
                        f"provider {provider.name!r}: scope_of({item.ref.ref!r}) is "
                        f"{placed!r} but the item was listed in scope {scope!r}; the poller "
                        "decides absence per scope, so the two must agree.")

    def test_a_foreign_ref_is_not_owned(self, providers: list[Any], foreign_ref: str) -> None:
        from hostcore.workitems.items import WorkItemRef

        for provider in providers:
            try:
                owned = provider.owns(WorkItemRef(foreign_ref))
            except Exception as exc:
                contract_failure(f"provider {provider.name!r}: owns({foreign_ref!r}) raised; "
                                 "return False for a ref that is not yours.", raised=exc)
            require(owned is False, f"provider {provider.name!r}: owns({foreign_ref!r}) "
                                    f"returned {owned!r}; it must be False for a ref of "
                                    "another tracker.")

    def test_closure_of_a_listed_item_says_open(self, providers: list[Any]) -> None:
        from hostcore.workitems.items import Closure, ProviderError

        for provider in providers:
            for _, item in self._listed(provider):
                try:
                    closure = provider.closure(item.ref)
                except ProviderError as exc:
                    contract_failure(f"provider {provider.name!r}: closure({item.ref.ref!r}) "
                                     "raised ProviderError for an item its working backend "
                                     "just listed as open.", raised=exc)
                except Exception as exc:
                    contract_failure(self._wrong_error(provider, item.ref.ref, exc),
                                     raised=exc)
                require(isinstance(closure, Closure),
                        f"provider {provider.name!r}: closure({item.ref.ref!r}) returned "
                        f"{type(closure).__name__}; it must return hostcore.plugin."
                        "Closure(state='open'|'closed'|'merged', ...).")
                require(closure.state == "open",
                        f"provider {provider.name!r}: closure({item.ref.ref!r}) says "
                        f"{closure.state!r} for an item listed as open.")

    def test_a_broken_backend_fails_the_listing_honestly(
            self, provider_host: Any, providers: list[Any],
            break_backend: Callable[[Any], None]) -> None:
        from hostcore.workitems.items import ProviderError

        before = {p.name: {s for s, _ in self._listed(p)} for p in providers}
        break_backend(provider_host)
        for provider in providers:
            try:
                listing = self._listing(provider)
            except ProviderError:
                continue
            statuses = {scope.scope: scope.status for scope in listing.scopes}
            lying = sorted(s for s in before[provider.name] if statuses.get(s) == "complete")
            missing = sorted(s for s in before[provider.name] if s not in statuses)
            require(not lying,
                    f"provider {provider.name!r}: with its backend broken, scopes {lying} are "
                    "still reported complete. A scope that could not be listed is failed, "
                    "interrupted or degraded: the poller treats every tracked item missing "
                    "from a complete scope as closed.")
            require(not missing,
                    f"provider {provider.name!r}: with its backend broken, scopes {missing} "
                    "vanished from the listing. Report them as failed so the poller knows "
                    "their items were not seen.")

    def test_an_unanswerable_closure_raises_provider_error(
            self, provider_host: Any, providers: list[Any],
            break_backend: Callable[[Any], None]) -> None:
        from hostcore.workitems.items import ProviderError

        listed = {p.name: [item.ref for _, item in self._listed(p)] for p in providers}
        break_backend(provider_host)
        for provider in providers:
            for ref in listed[provider.name]:
                try:
                    answer = provider.closure(ref)
                except ProviderError:
                    continue
                except Exception as exc:
                    contract_failure(self._wrong_error(provider, ref.ref, exc), raised=exc)
                contract_failure(
                    f"provider {provider.name!r}: closure({ref.ref!r}) returned {answer!r} "
                    "with its backend broken. When it cannot answer it must raise "
                    "hostcore.plugin.ProviderError, so the poller keeps the item and asks "
                    "again later.")

    @staticmethod
    def _wrong_error(provider: Any, ref: str, exc: BaseException) -> str:
        return (f"provider {provider.name!r}: closure({ref!r}) raised {type(exc).__name__}; "
                "a provider that cannot answer must raise hostcore.plugin.ProviderError "
                "naming the ref (and nothing else), so the poller can tell 'no answer' from "
                "a bug.")
