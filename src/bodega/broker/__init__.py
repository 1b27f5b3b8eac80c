"""bodega.broker"""
