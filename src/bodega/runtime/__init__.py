"""bodega.runtime"""
