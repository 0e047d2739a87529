"""``/api/v1/configs``: named delegate configs in layers, and what they resolve to per device."""

from __future__ import annotations

from fastapi import APIRouter

from controller.api.convert import config_change_out, config_out, resolved_out
from controller.api.params import ConfigNamePath, DeviceIdPath, DeviceIdQuery, ScopeQuery
from controller.api.schemas import ConfigChange, ConfigLayerIn, ConfigOut, ResolvedConfigOut
from controller.services import Services


def configs_router(services: Services) -> APIRouter:
    """The named delegate config routes over ``services.configs`` and ``services.fleet``."""
    router = APIRouter(tags=["configs"])
    configs = services.configs

    @router.put("/configs/{name}")
    def put_config(name: ConfigNamePath, layer: ConfigLayerIn) -> ConfigChange:
        """Create or replace one layer; slots using the config are re-resolved and republished."""
        return config_change_out(services.fleet.put_config(name, layer.scope, layer.values))

    @router.get("/configs")
    def list_configs() -> list[ConfigOut]:
        return [config_out(c) for c in configs.all()]

    @router.get("/configs/{name}")
    def show_config(name: ConfigNamePath) -> ConfigOut:
        return config_out(configs.show(name))

    @router.delete("/configs/{name}")
    def delete_config(name: ConfigNamePath, scope: ScopeQuery = None) -> ConfigChange:
        """Delete the layer ``scope`` (or, without it, every layer) and republish its users."""
        return config_change_out(services.fleet.delete_config(name, scope))

    @router.get("/configs/{name}/resolve")
    def resolve_config(
        name: ConfigNamePath, device: DeviceIdQuery, model: str
    ) -> ResolvedConfigOut:
        """The effective config of ``model`` (N or N:V) on ``device`` under config ``name``."""
        return resolved_out(configs.resolve(name, device, model))

    @router.get("/devices/{device_id}/resolve")
    def resolve_slot(device_id: DeviceIdPath, model: str) -> ResolvedConfigOut:
        """Like /configs/{name}/resolve with the config the device's slot names (or none)."""
        return resolved_out(configs.resolve(None, device_id, model))

    return router
